package delta

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// MaxEncodedSize is the largest encoding, in bytes, that the encoders
// produce and the decoders read: deltas, documents and sync messages. A
// document whose state outgrows it can no longer be encoded whole.
const MaxEncodedSize = 8 << 20

// ErrTooLarge reports a state whose encoding would exceed MaxEncodedSize.
var ErrTooLarge = errors.New("delta: encoding larger than MaxEncodedSize")

// decLimits are the structure limits of the decoders. The formats nest at
// most five levels; arrays are long only in big documents (one element per
// entry, three per context range). Unknown map fields (sync messages only)
// are ignored, for forward compatibility.
var decLimits = wirecodec.Limits{
	MaxNestedLevels:  8,
	MaxArrayElements: 1 << 19,
	MaxMapPairs:      MaxClockEntries,
}

// The format: version, then what the bytes hold.
const (
	formatVersion = 1
	formatDoc     = 1
	formatDelta   = 2
)

var encMode, decMode = mustEncMode(), wirecodec.NewDecMode(decLimits)

// mustEncMode is core deterministic encoding with nil slices and maps as
// empty ones, so that a nil and an empty value encode alike.
func mustEncMode() cbor.EncMode {
	eo := cbor.CoreDetEncOptions()
	eo.NilContainers = cbor.NilContainerAsEmpty
	em, err := eo.EncMode()
	if err != nil {
		panic("delta: cbor encoding options: " + err.Error()) // a bug, caught by any test
	}
	return em
}

// wireState is the encoding of a Doc (formatDoc) or a Delta (formatDelta).
// Replica IDs appear once, in Replicas, sorted; everything else names a
// replica by its index there. Context and Dots are (replica, lo, hi)
// triples: sorted by replica then lo, each replica's ranges disjoint and
// non-adjacent. Every replica has at least one range in Context.
type wireState struct {
	_        struct{} `cbor:",toarray"`
	Version  uint64
	Format   uint64
	Replicas []string
	Context  []uint64
	Dots     []uint64 // dots the delta mints; empty for a document
	Lamport  uint64
	Entries  []wireEntry // sorted by path, at most one per path
}

// wireEntry is what one path holds; at least one list is non-empty.
type wireEntry struct {
	_     struct{} `cbor:",toarray"`
	Path  string
	Regs  []wireReg  // sorted by (replica, seq)
	Elems []wireElem // sorted by value, bytewise
	Cnts  []wireCnt  // sorted by (replica, seq)
}

type wireReg struct {
	_       struct{} `cbor:",toarray"`
	Replica uint64
	Seq     uint64
	Lamport uint64
	Value   string // canonical JSON, never a non-empty object
}

type wireElem struct {
	_     struct{} `cbor:",toarray"`
	Value string   // canonical JSON
	Dots  []uint64 // (replica, seq) pairs, sorted
}

type wireCnt struct {
	_       struct{} `cbor:",toarray"`
	Replica uint64
	Seq     uint64
	Total   int64
}

// EncodeDelta returns the deterministic CBOR encoding of x: equal deltas
// encode to equal bytes.
func EncodeDelta(x *Delta) ([]byte, error) {
	return encodeState(x.state(), &x.minted, formatDelta)
}

// EncodeDoc returns the deterministic CBOR encoding of d's full state, for
// storage. The replica ID is not part of it.
func EncodeDoc(d *Doc) ([]byte, error) {
	return encodeState(d.state(), nil, formatDoc)
}

func encodeState(st *state, minted *Context, format uint64) ([]byte, error) {
	reps := st.ctx.Replicas()
	idx := make(map[string]uint64, len(reps))
	for i, r := range reps {
		idx[r] = uint64(i)
	}
	w := wireState{
		Version:  formatVersion,
		Format:   format,
		Replicas: reps,
		Context:  flatContext(&st.ctx, reps),
		Dots:     flatContext(minted, reps),
		Lamport:  st.lamport,
	}
	w.Entries = make([]wireEntry, 0, min(len(st.index), 1024))
	var walk func(n *node, path string)
	walk = func(n *node, path string) {
		if n.hasEntries() {
			w.Entries = append(w.Entries, wireEntryOf(n, path, idx))
		}
		for seg, k := range n.kids {
			walk(k, path+"/"+escapeSegment(seg))
		}
	}
	walk(st.root, "")
	slices.SortFunc(w.Entries, func(a, b wireEntry) int { return strings.Compare(a.Path, b.Path) })
	b, err := encMode.Marshal(&w)
	if err != nil { // not reached: every field encodes
		return nil, err
	}
	if len(b) > MaxEncodedSize {
		return nil, ErrTooLarge
	}
	return b, nil
}

func flatContext(c *Context, reps []string) []uint64 {
	var out []uint64
	if c == nil {
		return out
	}
	for i, r := range reps {
		for _, s := range c.m[r] {
			out = append(out, uint64(i), s.lo, s.hi)
		}
	}
	return out
}

func wireEntryOf(n *node, path string, idx map[string]uint64) wireEntry {
	e := wireEntry{Path: path}
	for _, r := range n.regs {
		e.Regs = append(e.Regs, wireReg{Replica: idx[r.d.Replica], Seq: r.d.Seq, Lamport: r.lamport, Value: r.val})
	}
	slices.SortFunc(e.Regs, func(a, b wireReg) int {
		return cmp.Or(cmp.Compare(a.Replica, b.Replica), cmp.Compare(a.Seq, b.Seq))
	})
	for v, ds := range n.elems {
		we := wireElem{Value: v}
		for d := range ds {
			we.Dots = append(we.Dots, idx[d.Replica], d.Seq)
		}
		sortPairs(we.Dots)
		e.Elems = append(e.Elems, we)
	}
	slices.SortFunc(e.Elems, func(a, b wireElem) int { return strings.Compare(a.Value, b.Value) })
	for _, c := range n.cnts {
		e.Cnts = append(e.Cnts, wireCnt{Replica: idx[c.d.Replica], Seq: c.d.Seq, Total: c.total})
	}
	slices.SortFunc(e.Cnts, func(a, b wireCnt) int {
		return cmp.Or(cmp.Compare(a.Replica, b.Replica), cmp.Compare(a.Seq, b.Seq))
	})
	return e
}

// sortPairs sorts a flat list of (replica, seq) pairs.
func sortPairs(p []uint64) {
	type pair struct{ r, s uint64 }
	ps := make([]pair, len(p)/2)
	for i := range ps {
		ps[i] = pair{p[2*i], p[2*i+1]}
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Or(cmp.Compare(a.r, b.r), cmp.Compare(a.s, b.s)) })
	for i, x := range ps {
		p[2*i], p[2*i+1] = x.r, x.s
	}
}

// DecodeDelta decodes a delta made by [EncodeDelta]. In order it rejects
// input larger than MaxEncodedSize, decodes with strict limits (nesting,
// array and map sizes; no indefinite lengths, duplicate map keys or tags)
// and validates the result: every replica ID valid, contexts in compact
// form, every dot in the context and in one place only, paths valid,
// values canonical JSON, entries sorted. Any failure is a
// *[DeserializationError] (code CRDT_DESERIALIZATION_FAILED). It never
// panics.
func DecodeDelta(b []byte) (*Delta, error) {
	st, minted, err := decodeState(b, "delta", formatDelta)
	if err != nil {
		return nil, err
	}
	return &Delta{st: st, minted: *minted}, nil
}

// DecodeDoc decodes a document made by [EncodeDoc], with the checks of
// [DecodeDelta]. The result has no replica: read it, or join it into a
// document made by [New] (that is how a replica restores its state).
func DecodeDoc(b []byte) (*Doc, error) {
	st, _, err := decodeState(b, "doc", formatDoc)
	if err != nil {
		return nil, err
	}
	return &Doc{st: st}, nil
}

func decodeState(b []byte, what string, format uint64) (*state, *Context, error) {
	fail := func(cause error, f string, args ...any) (*state, *Context, error) {
		return nil, nil, deserr(what, cause, f, args...)
	}
	if len(b) > MaxEncodedSize {
		return fail(nil, "%d bytes, over the %d-byte limit", len(b), MaxEncodedSize)
	}
	var w wireState
	if err := decMode.Unmarshal(b, &w); err != nil {
		return fail(err, "malformed cbor")
	}
	if w.Version != formatVersion {
		return fail(nil, "format version %d, want %d", w.Version, formatVersion)
	}
	if w.Format != format {
		return fail(nil, "format %d, want %d", w.Format, format)
	}
	for i, r := range w.Replicas {
		if err := checkID(r); err != nil {
			return fail(err, "replica %d", i)
		}
		if i > 0 && r <= w.Replicas[i-1] {
			return fail(nil, "replicas not sorted or repeated")
		}
	}
	ctx, err := readContext(w.Context, w.Replicas)
	if err != nil {
		return fail(err, "context")
	}
	if len(ctx.m) != len(w.Replicas) {
		return fail(nil, "replica without a dot in the context")
	}
	minted, err := readContext(w.Dots, w.Replicas)
	if err != nil {
		return fail(err, "dots")
	}
	if !spansAllIn(minted, ctx) {
		return fail(nil, "minted dots outside the context")
	}
	if format == formatDoc && !minted.IsEmpty() {
		return fail(nil, "a document mints no dots")
	}
	st := newState()
	st.ctx = *ctx
	st.lamport = w.Lamport
	r := &reader{st: st, reps: w.Replicas, lamport: w.Lamport}
	for i, e := range w.Entries {
		if i > 0 && e.Path <= w.Entries[i-1].Path {
			return fail(nil, "entries not sorted by path or repeated")
		}
		if err := r.entry(&e); err != nil {
			return fail(err, "entry %d", i)
		}
	}
	return st, minted, nil
}

// readContext reads (replica, lo, hi) triples in compact form.
func readContext(flat []uint64, reps []string) (*Context, error) {
	if len(flat)%3 != 0 {
		return nil, errString("not a list of (replica, lo, hi) triples")
	}
	c := &Context{m: make(map[string][]span)}
	for i := 0; i < len(flat); i += 3 {
		ri, lo, hi := flat[i], flat[i+1], flat[i+2]
		if ri >= uint64(len(reps)) {
			return nil, errString("replica index out of range")
		}
		if lo == 0 || lo > hi {
			return nil, errString("empty range or sequence number 0")
		}
		if i > 0 {
			pr, phi := flat[i-3], flat[i-1]
			if ri < pr || (ri == pr && (lo <= phi || lo-phi == 1)) {
				return nil, errString("ranges not sorted, overlapping or adjacent")
			}
		}
		r := reps[ri]
		c.m[r] = append(c.m[r], span{lo, hi})
	}
	return c, nil
}

type reader struct {
	st      *state
	reps    []string
	lamport uint64
}

// dot checks that (ri, seq) is a dot of the context held nowhere else.
func (r *reader) dot(ri, seq uint64) (Dot, error) {
	if ri >= uint64(len(r.reps)) || seq == 0 {
		return Dot{}, errString("invalid dot")
	}
	d := Dot{Replica: r.reps[ri], Seq: seq}
	if !r.st.ctx.Contains(d) {
		return Dot{}, errString("dot " + d.String() + " outside the context")
	}
	if _, dup := r.st.index[d]; dup {
		return Dot{}, errString("dot " + d.String() + " held twice")
	}
	return d, nil
}

func (r *reader) entry(e *wireEntry) error {
	segs, err := SplitPath(e.Path)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		return errString("entry at the root")
	}
	if len(e.Regs)+len(e.Elems)+len(e.Cnts) == 0 {
		return errString("empty entry")
	}
	n := r.st.ensure(segs)
	for i, g := range e.Regs {
		if i > 0 && !pairLess(e.Regs[i-1].Replica, e.Regs[i-1].Seq, g.Replica, g.Seq) {
			return errString("register values not sorted")
		}
		d, err := r.dot(g.Replica, g.Seq)
		if err != nil {
			return err
		}
		if g.Lamport == 0 || g.Lamport > r.lamport {
			return errString("register lamport time out of range")
		}
		if !isCanonical(g.Value) {
			return errString("register value not canonical JSON")
		}
		if g.Value[0] == '{' && g.Value != emptyObject {
			return errString("register value is an object (objects are spread over paths)")
		}
		r.st.putReg(n, d, reg{lamport: g.Lamport, val: g.Value})
	}
	for i, el := range e.Elems {
		if i > 0 && el.Value <= e.Elems[i-1].Value {
			return errString("set elements not sorted or repeated")
		}
		if !isCanonical(el.Value) {
			return errString("set element not canonical JSON")
		}
		if len(el.Dots) == 0 || len(el.Dots)%2 != 0 {
			return errString("set element without (replica, seq) pairs")
		}
		for j := 0; j < len(el.Dots); j += 2 {
			if j > 0 && !pairLess(el.Dots[j-2], el.Dots[j-1], el.Dots[j], el.Dots[j+1]) {
				return errString("set element dots not sorted")
			}
			d, err := r.dot(el.Dots[j], el.Dots[j+1])
			if err != nil {
				return err
			}
			r.st.putElem(n, el.Value, d)
		}
	}
	for i, c := range e.Cnts {
		if i > 0 && !pairLess(e.Cnts[i-1].Replica, e.Cnts[i-1].Seq, c.Replica, c.Seq) {
			return errString("counter dots not sorted")
		}
		d, err := r.dot(c.Replica, c.Seq)
		if err != nil {
			return err
		}
		r.st.putCnt(n, d, c.Total)
	}
	return nil
}

func pairLess(r1, s1, r2, s2 uint64) bool { return r1 < r2 || (r1 == r2 && s1 < s2) }
