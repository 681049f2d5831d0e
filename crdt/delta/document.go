package delta

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the longest replica or agent ID, in bytes.
const MaxIDLen = 256

// checkID validates a replica or agent ID: 1..MaxIDLen bytes of UTF-8
// without control characters.
func checkID(id string) error {
	if id == "" || len(id) > MaxIDLen || !utf8.ValidString(id) {
		return ErrInvalidReplica
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return ErrInvalidReplica
		}
	}
	return nil
}

// Doc is a replicated JSON document: one replica's state of the
// observed-remove map from path to value described in the package
// documentation.
//
// The mutators (Set, Delete, SetAdd, SetRemove, Incr) never change the
// document: each returns a [Delta], and only [Doc.Join] changes state.
// Join a delta before calling the next mutator (or use [Doc.Apply]): a
// mutator takes the replica's next dot from the document's context, so two
// mutators with no Join in between take the same dot, and joining both
// keeps only one of the two updates.
//
// A Doc is not safe for concurrent use; give each document one owner.
type Doc struct {
	replica string
	st      *state
}

// New returns an empty document for replica, whose updates will carry dots
// of that replica. A replica ID must be unique in the swarm and must never
// be reused by a replica that lost its state: dots would repeat.
func New(replica string) (*Doc, error) {
	if err := checkID(replica); err != nil {
		return nil, err
	}
	return &Doc{replica: replica, st: newState()}, nil
}

func (d *Doc) state() *state {
	if d.st == nil {
		d.st = newState()
	}
	return d.st
}

// Replica returns the replica ID of d, empty for a document made by
// [DecodeDoc] (which can be read and joined, not mutated).
func (d *Doc) Replica() string { return d.replica }

func (d *Doc) mutate(path string, f func(segs []string) (*state, *Context, error)) (*Delta, error) {
	if err := checkID(d.replica); err != nil {
		return nil, err
	}
	segs, err := SplitPath(path)
	if err != nil {
		return nil, err
	}
	x, minted, err := f(segs)
	if err != nil {
		return nil, err
	}
	return &Delta{st: x, minted: *minted}, nil
}

// Set returns the delta that writes value at path. A non-empty object is
// spread over paths, one register per member that is not itself a
// non-empty object; any other value (null, boolean, number, string, array,
// {}) is stored whole. The write replaces everything at and below path, and
// any non-object value at an ancestor of path. At the root "" the value
// must be an object; Set("", {}) empties the document.
func (d *Doc) Set(path string, value json.RawMessage) (*Delta, error) {
	v, err := parseJSON(value)
	if err != nil {
		return nil, err
	}
	return d.mutate(path, func(segs []string) (*state, *Context, error) {
		if len(segs) == 0 && !v.obj {
			return nil, nil, valueErr("the root can only be set to an object")
		}
		var leaves []leaf
		if len(segs) > 0 || len(v.keys) > 0 {
			var ferr error
			if leaves, ferr = flatten(segs, v, nil); ferr != nil {
				return nil, nil, ferr
			}
		}
		return d.state().opSet(d.replica, segs, leaves)
	})
}

// Delete returns the delta that removes path and everything below it.
// Delete("") removes everything. Deleting a path that holds nothing is not
// an error.
func (d *Doc) Delete(path string) (*Delta, error) {
	return d.mutate(path, func(segs []string) (*state, *Context, error) {
		return d.state().opDelete(d.replica, segs)
	})
}

// SetAdd returns the delta that adds elem, any JSON value, to the
// observed-remove set at path (not the root). A set replaces a register or
// counter at path, anything below it and non-object values above it.
func (d *Doc) SetAdd(path string, elem json.RawMessage) (*Delta, error) {
	e, err := canonicalJSON(elem)
	if err != nil {
		return nil, err
	}
	return d.mutate(path, func(segs []string) (*state, *Context, error) {
		if len(segs) == 0 {
			return nil, nil, pathErr(path, "the root is an object, not a set")
		}
		return d.state().opAdd(d.replica, segs, e)
	})
}

// SetRemove returns the delta that removes elem from the set at path: the
// additions of elem this replica has seen. An addition it has not seen
// survives (add wins).
func (d *Doc) SetRemove(path string, elem json.RawMessage) (*Delta, error) {
	e, err := canonicalJSON(elem)
	if err != nil {
		return nil, err
	}
	return d.mutate(path, func(segs []string) (*state, *Context, error) {
		if len(segs) == 0 {
			return nil, nil, pathErr(path, "the root is an object, not a set")
		}
		return d.state().opRemove(d.replica, segs, e)
	})
}

// Incr returns the delta that adds by (negative to decrement) to the
// counter at path (not the root). A counter replaces a register or set at
// path, anything below it and non-object values above it. The replica's
// own total at path must stay within int64 ([ErrOverflow]).
func (d *Doc) Incr(path string, by int64) (*Delta, error) {
	return d.mutate(path, func(segs []string) (*state, *Context, error) {
		if len(segs) == 0 {
			return nil, nil, pathErr(path, "the root is an object, not a counter")
		}
		return d.state().opIncr(d.replica, segs, by)
	})
}

// Apply joins x into d when err is nil and returns both, so that
// x, err := d.Apply(d.Set(path, v)) updates d and keeps the delta to
// publish.
func (d *Doc) Apply(x *Delta, err error) (*Delta, error) {
	if err != nil {
		return nil, err
	}
	d.Join(x)
	return x, nil
}

// Join merges x into d: the only way d's state changes. Joining is
// idempotent, commutative and associative, so deltas may arrive late,
// twice or out of order. x is unchanged.
func (d *Doc) Join(x *Delta) {
	if x == nil {
		return
	}
	d.state().join(x.state())
}

// JoinDoc merges o's full state into d. o is unchanged.
func (d *Doc) JoinDoc(o *Doc) {
	if o == nil || o == d {
		return
	}
	d.state().join(o.state())
}

// State returns d's full state as a delta: what a peer that knows nothing
// needs. It mints no dot.
func (d *Doc) State() *Delta { return &Delta{st: d.state().clone()} }

// DeltaSince returns the delta that brings a replica whose context
// includes peer up to date with d: joined there, it has exactly the effect
// of joining d's full state, at the cost of the entries peer lacks plus
// the ranges of d's context. peer may under-approximate the replica's real
// context (a [VersionVector.Context] of its clock, or nil for none); the
// result is then larger, never wrong. It mints no dot.
func (d *Doc) DeltaSince(peer *Context) *Delta {
	return &Delta{st: d.state().since(peer)}
}

// Ready reports whether x, received with the sender's clock, is causally
// ready at d: whether d has seen every dot that clock covers, except the
// dots x itself mints. A delta that is not ready depends on updates d
// missed: hold it, ask the sender for DeltaSince(d.Context()), and join
// it after the answer (see the package documentation).
func (d *Doc) Ready(clock VersionVector, x *Delta) bool {
	var minted *Context
	if x != nil {
		minted = &x.minted
	}
	ctx := &d.state().ctx
	for r, n := range clock {
		if n == 0 {
			continue
		}
		ss := mergeSpans(append([]span(nil), ctx.spans(r)...), minted.spans(r))
		if len(ss) == 0 || ss[0].lo != 1 || ss[0].hi < n {
			return false
		}
	}
	return true
}

// Seen reports whether d has already seen every dot x mints (a duplicate
// or stale update), false for a delta that mints none.
func (d *Doc) Seen(x *Delta) bool {
	if x == nil || x.minted.IsEmpty() {
		return false
	}
	return spansAllIn(&x.minted, &d.state().ctx)
}

func spansAllIn(a, b *Context) bool {
	for r, ss := range a.m {
		if !spansSubset(ss, b.m[r]) {
			return false
		}
	}
	return true
}

// Context returns a copy of d's causal context.
func (d *Doc) Context() *Context { return d.state().ctx.Clone() }

// Clock returns d's vector clock: the version vector part of its context.
func (d *Doc) Clock() VersionVector { return d.state().ctx.Clock() }

// Get returns the value at path as canonical JSON: the whole document for
// the root "", an object for a path with members, else the winner among
// what the path holds (see the package documentation). It returns false
// when nothing is at path or path is invalid.
func (d *Doc) Get(path string) (json.RawMessage, bool) {
	segs, err := SplitPath(path)
	if err != nil {
		return nil, false
	}
	st := d.state()
	n := st.find(segs)
	if n == nil {
		return nil, false
	}
	if n == st.root {
		return json.RawMessage(objectJSON(n)), true
	}
	return json.RawMessage(valueJSON(n)), true
}

// Values returns every value path holds, the one Get returns first, then
// the concurrent alternatives a read hides: values written concurrently at
// path (from the last writer down) and values of another kind (set,
// counter, register) written concurrently with the winner. Nil when
// nothing is at path.
func (d *Doc) Values(path string) []json.RawMessage {
	segs, err := SplitPath(path)
	if err != nil {
		return nil
	}
	st := d.state()
	n := st.find(segs)
	if n == nil {
		return nil
	}
	var out []json.RawMessage
	for _, c := range candidates(n, n == st.root) {
		out = append(out, json.RawMessage(c))
	}
	return out
}

// JSON returns the whole document as canonical JSON: an object, {} when
// empty, members sorted by key.
func (d *Doc) JSON() json.RawMessage { return json.RawMessage(objectJSON(d.state().root)) }

// Paths returns the paths that hold a value, a set or a counter, sorted
// bytewise. Interior paths (objects) are not listed.
func (d *Doc) Paths() []string { return d.state().leafPaths() }

// Len returns the number of live entries: register values, set additions
// and counter dots.
func (d *Doc) Len() int { return len(d.state().index) }

// Clone returns a deep copy of d with the same replica.
func (d *Doc) Clone() *Doc { return &Doc{replica: d.replica, st: d.state().clone()} }

// Equal reports whether d and o hold the same state. Replica IDs are not
// compared.
func (d *Doc) Equal(o *Doc) bool { return d.state().equal(o.state()) }
