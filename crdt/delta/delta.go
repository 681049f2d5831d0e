package delta

// Delta is a fragment of a document: the entries an update writes, the
// dots of the entries it replaces, as its own causal context, and the dots
// it mints. A delta is itself a state of the same lattice as [Doc], so
// deltas join into delta groups ([Delta.Join]) and any delta, group or
// full state ([Doc.State]) joins into any document in any order, any
// number of times.
//
// Deltas come from the mutators of [Doc], from [Doc.DeltaSince],
// [Doc.State], [Buffer.Since] and [DecodeDelta]; the zero value is an empty
// delta. A Delta is not safe for concurrent use; treat one as immutable
// once it is shared.
type Delta struct {
	st     *state
	minted Context
}

func (x *Delta) state() *state {
	if x.st == nil {
		x.st = newState()
	}
	return x.st
}

// Join merges y into x, forming a delta group: joining the group into a
// document has the effect of joining x and y in either order. y is
// unchanged.
func (x *Delta) Join(y *Delta) {
	if y == nil || x == y {
		return
	}
	x.state().join(y.state())
	x.minted.Join(&y.minted)
}

// Clone returns a deep copy of x.
func (x *Delta) Clone() *Delta {
	return &Delta{st: x.state().clone(), minted: *x.minted.Clone()}
}

// Context returns a copy of x's causal context: the dots it writes, the
// dots of the entries it replaces or removes, and the dots it mints.
func (x *Delta) Context() *Context { return x.state().ctx.Clone() }

// Dots returns a copy of the dots x mints: one per entry an update writes,
// or one for an update that only removes. A group's dots are the union of
// its members'. Deltas made by [Doc.DeltaSince] and [Doc.State] mint none.
// The network layer checks that a published delta mints only dots of the
// publisher's replica.
func (x *Delta) Dots() *Context { return x.minted.Clone() }

// Paths returns the paths that x writes an entry at, sorted.
func (x *Delta) Paths() []string { return x.state().leafPaths() }

// IsEmpty reports whether x carries nothing: no entry and no dot.
func (x *Delta) IsEmpty() bool { return x.state().ctx.IsEmpty() }

// Equal reports whether x and y are the same delta (entries, contexts and
// minted dots).
func (x *Delta) Equal(y *Delta) bool {
	return x.state().equal(y.state()) && x.minted.Equal(&y.minted)
}

// MintedRange returns the replica and the range lo..hi of the dots x
// mints, with ok false unless x mints exactly one contiguous range of one
// replica's dots (what every mutator of [Doc] produces).
func (x *Delta) MintedRange() (replica string, lo, hi uint64, ok bool) {
	if len(x.minted.m) != 1 {
		return "", 0, 0, false
	}
	for r, ss := range x.minted.m {
		if len(ss) != 1 {
			return "", 0, 0, false
		}
		return r, ss[0].lo, ss[0].hi, true
	}
	return "", 0, 0, false
}

// EntriesMinted reports whether every entry x holds carries a dot x
// mints: true of every delta a mutator of [Doc] returns, false of a delta
// that carries entries written by other updates (a [Doc.DeltaSince], or a
// forged update copying another replica's entries).
func (x *Delta) EntriesMinted() bool {
	for d := range x.state().index {
		if !x.minted.Contains(d) {
			return false
		}
	}
	return true
}

// Lamport returns the greatest Lamport time x carries.
func (x *Delta) Lamport() uint64 { return x.state().lamport }
