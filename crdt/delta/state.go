package delta

import (
	"cmp"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"
)

// This file holds the dot store every type of the package is built on: an
// observed-remove map from path to a product of three dot stores (a
// multi-value register, an add-wins set, a causal counter), plus a causal
// context and a Lamport clock. Each dot lives in exactly one place, and an
// index from dot to place makes a join cost the size of the smaller side.

// kind is the part of a node an entry lives in.
type kind uint8

const (
	kindReg kind = iota + 1
	kindElem
	kindCnt
)

// reg is a register value with the Lamport time of its write.
type reg struct {
	lamport uint64
	val     string // canonical JSON
}

// regCompare orders register values by (lamport, replica, seq, value): the
// greatest is the last-writer-wins winner.
func regCompare(a Dot, av reg, b Dot, bv reg) int {
	return cmp.Or(
		cmp.Compare(av.lamport, bv.lamport),
		strings.Compare(a.Replica, b.Replica),
		cmp.Compare(a.Seq, b.Seq),
		strings.Compare(av.val, bv.val),
	)
}

type dotSet map[Dot]struct{}

// regEntry is a register value at its dot.
type regEntry struct {
	d Dot
	reg
}

// cntEntry is a replica's running counter total at its dot.
type cntEntry struct {
	d     Dot
	total int64
}

// node is one path of the tree. A node exists only while it or a
// descendant holds an entry. Registers and counters hold few entries (one
// per concurrent write, one per counting replica), kept in slices in no
// particular order; the index records each one's position, so removal is
// a swap with the last.
type node struct {
	parent *node
	seg    string
	kids   map[string]*node
	regs   []regEntry
	elems  map[string]dotSet // canonical element -> its dots
	cnts   []cntEntry
}

func (n *node) hasEntries() bool { return len(n.regs)+len(n.elems)+len(n.cnts) > 0 }

func (n *node) empty() bool { return len(n.kids) == 0 && !n.hasEntries() }

func (n *node) child(seg string) *node {
	if n.kids == nil {
		n.kids = make(map[string]*node)
	}
	k := n.kids[seg]
	if k == nil {
		k = &node{parent: n, seg: seg}
		n.kids[seg] = k
	}
	return k
}

// segments returns the path of n from the root.
func (n *node) segments() []string {
	var segs []string
	for ; n.parent != nil; n = n.parent {
		segs = append(segs, n.seg)
	}
	slices.Reverse(segs)
	return segs
}

func (n *node) path() string { return JoinPath(n.segments()...) }

// loc is where a dot lives.
type loc struct {
	n    *node
	k    kind
	i    int    // position in n.regs or n.cnts
	elem string // for kindElem
}

// state is a dot store with its causal context.
type state struct {
	ctx     Context
	lamport uint64 // the greatest Lamport time joined
	root    *node
	index   map[Dot]loc
}

func newState() *state { return &state{root: &node{}, index: make(map[Dot]loc)} }

// find returns the node at segs, or nil.
func (s *state) find(segs []string) *node {
	n := s.root
	for _, seg := range segs {
		if n = n.kids[seg]; n == nil {
			return nil
		}
	}
	return n
}

func (s *state) ensure(segs []string) *node {
	n := s.root
	for _, seg := range segs {
		n = n.child(seg)
	}
	return n
}

func (s *state) putReg(n *node, d Dot, r reg) {
	n.regs = append(n.regs, regEntry{d: d, reg: r})
	s.index[d] = loc{n: n, k: kindReg, i: len(n.regs) - 1}
}

func (s *state) putElem(n *node, e string, d Dot) {
	if n.elems == nil {
		n.elems = make(map[string]dotSet)
	}
	ds := n.elems[e]
	if ds == nil {
		ds = make(dotSet)
		n.elems[e] = ds
	}
	ds[d] = struct{}{}
	s.index[d] = loc{n: n, k: kindElem, elem: e}
}

func (s *state) putCnt(n *node, d Dot, v int64) {
	n.cnts = append(n.cnts, cntEntry{d: d, total: v})
	s.index[d] = loc{n: n, k: kindCnt, i: len(n.cnts) - 1}
}

// moved records that the entry of d now sits at position i.
func (s *state) moved(d Dot, i int) {
	l := s.index[d]
	l.i = i
	s.index[d] = l
}

// del removes the entry of d, if any, and prunes nodes left empty.
func (s *state) del(d Dot) {
	l, ok := s.index[d]
	if !ok {
		return
	}
	delete(s.index, d)
	switch l.k {
	case kindReg:
		rs, last := l.n.regs, len(l.n.regs)-1
		if l.i != last {
			rs[l.i] = rs[last]
			s.moved(rs[l.i].d, l.i)
		}
		rs[last] = regEntry{}
		l.n.regs = rs[:last]
	case kindElem:
		ds := l.n.elems[l.elem]
		delete(ds, d)
		if len(ds) == 0 {
			delete(l.n.elems, l.elem)
		}
	case kindCnt:
		cs, last := l.n.cnts, len(l.n.cnts)-1
		if l.i != last {
			cs[l.i] = cs[last]
			s.moved(cs[l.i].d, l.i)
		}
		l.n.cnts = cs[:last]
	}
	s.prune(l.n)
}

func (s *state) prune(n *node) {
	for n != s.root && n.empty() {
		delete(n.parent.kids, n.seg)
		n = n.parent
	}
}

// nodeDots appends the dots of n's own entries.
func nodeDots(n *node, out []Dot) []Dot {
	for _, e := range n.regs {
		out = append(out, e.d)
	}
	for _, ds := range n.elems {
		for d := range ds {
			out = append(out, d)
		}
	}
	for _, e := range n.cnts {
		out = append(out, e.d)
	}
	return out
}

// subtreeDots appends the dots of n and of every descendant.
func subtreeDots(n *node, out []Dot) []Dot {
	out = nodeDots(n, out)
	for _, k := range n.kids {
		out = subtreeDots(k, out)
	}
	return out
}

// join merges o into s in place: the join of the paper, for dot stores
// with causal contexts. An entry survives if both sides hold it, or if one
// side holds it and the other's context has not seen its dot. It costs
// O(|o| + min(|o.ctx|, |s|)).
func (s *state) join(o *state) {
	if s == o || o == nil {
		return
	}
	var drop []Dot
	s.joinNode(s.root, o.root, &drop)
	// Entries of s whose dot o has seen but no longer holds: removed at o.
	if o.ctx.Len() <= uint64(len(s.index)) {
		o.ctx.each(func(d Dot) bool {
			if _, ok := s.index[d]; ok {
				if _, held := o.index[d]; !held {
					drop = append(drop, d)
				}
			}
			return true
		})
	} else {
		for d := range s.index {
			if _, held := o.index[d]; !held && o.ctx.Contains(d) {
				drop = append(drop, d)
			}
		}
	}
	for _, d := range drop {
		s.del(d)
	}
	s.ctx.Join(&o.ctx)
	s.lamport = max(s.lamport, o.lamport)
}

// joinNode adds o's entries under sn to dn. Dots held by both sides at
// different places (possible only in hostile input) are dropped from both,
// as the join of the paper does.
func (s *state) joinNode(dn, on *node, drop *[]Dot) {
	for _, e := range on.regs {
		d, r := e.d, e.reg
		if l, ok := s.index[d]; ok {
			if l.n == dn && l.k == kindReg {
				if cur := &dn.regs[l.i]; regCompare(d, cur.reg, d, r) < 0 {
					cur.reg = r // same dot, two values: keep the greater
				}
			} else {
				*drop = append(*drop, d)
			}
		} else if !s.ctx.Contains(d) {
			s.putReg(dn, d, r)
		}
	}
	for e, ds := range on.elems {
		for d := range ds {
			if l, ok := s.index[d]; ok {
				if l.n != dn || l.k != kindElem || l.elem != e {
					*drop = append(*drop, d)
				}
			} else if !s.ctx.Contains(d) {
				s.putElem(dn, e, d)
			}
		}
	}
	for _, e := range on.cnts {
		d, v := e.d, e.total
		if l, ok := s.index[d]; ok {
			if l.n == dn && l.k == kindCnt {
				cur := &dn.cnts[l.i]
				cur.total = max(cur.total, v)
			} else {
				*drop = append(*drop, d)
			}
		} else if !s.ctx.Contains(d) {
			s.putCnt(dn, d, v)
		}
	}
	for seg, ok := range on.kids {
		dk := dn.child(seg)
		s.joinNode(dk, ok, drop)
		if dk.empty() {
			delete(dn.kids, seg)
		}
	}
}

// copyInto copies the entries of on whose dot keep accepts into dn, a node
// of s.
func (s *state) copyInto(dn, on *node, keep func(Dot) bool) {
	for _, e := range on.regs {
		if keep(e.d) {
			s.putReg(dn, e.d, e.reg)
		}
	}
	for e, ds := range on.elems {
		for d := range ds {
			if keep(d) {
				s.putElem(dn, e, d)
			}
		}
	}
	for _, e := range on.cnts {
		if keep(e.d) {
			s.putCnt(dn, e.d, e.total)
		}
	}
	for seg, ok := range on.kids {
		dk := dn.child(seg)
		s.copyInto(dk, ok, keep)
		if dk.empty() {
			delete(dn.kids, seg)
		}
	}
}

func keepAll(Dot) bool { return true }

func (s *state) clone() *state {
	c := newState()
	c.ctx = *s.ctx.Clone()
	c.lamport = s.lamport
	c.copyInto(c.root, s.root, keepAll)
	return c
}

// since returns the smallest delta that brings a replica whose context is
// at least peer up to s: the entries whose dots peer has not seen, and s's
// context minus the dots of live entries that peer has seen. Leaving out
// only those dots is what makes it safe: every entry the peer holds and s
// still holds is absent from the delta's context, so the join keeps it,
// while every dot s has seen removed stays in, so the join removes it.
func (s *state) since(peer *Context) *state {
	x := newState()
	x.lamport = s.lamport
	x.ctx = *s.ctx.Clone()
	holes := make(map[string][]uint64)
	x.copyInto(x.root, s.root, func(d Dot) bool {
		if peer.Contains(d) {
			holes[d.Replica] = append(holes[d.Replica], d.Seq)
			return false
		}
		return true
	})
	x.ctx.punch(holes)
	return x
}

// equal reports whether s and o are the same state.
func (s *state) equal(o *state) bool {
	if s.lamport != o.lamport || len(s.index) != len(o.index) || !s.ctx.Equal(&o.ctx) {
		return false
	}
	return nodesEqual(s.root, o.root)
}

func nodesEqual(a, b *node) bool {
	if len(a.kids) != len(b.kids) || len(a.elems) != len(b.elems) ||
		!slices.Equal(byDot(a.regs, regDot), byDot(b.regs, regDot)) ||
		!slices.Equal(byDot(a.cnts, cntDot), byDot(b.cnts, cntDot)) {
		return false
	}
	for e, ds := range a.elems {
		if !maps.Equal(ds, b.elems[e]) {
			return false
		}
	}
	for seg, k := range a.kids {
		bk := b.kids[seg]
		if bk == nil || !nodesEqual(k, bk) {
			return false
		}
	}
	return true
}

func regDot(e regEntry) Dot { return e.d }
func cntDot(e cntEntry) Dot { return e.d }

func dotCompare(a, b Dot) int {
	return cmp.Or(strings.Compare(a.Replica, b.Replica), cmp.Compare(a.Seq, b.Seq))
}

// byDot returns a copy of es sorted by dot.
func byDot[E any](es []E, dot func(E) Dot) []E {
	out := slices.Clone(es)
	slices.SortFunc(out, func(a, b E) int { return dotCompare(dot(a), dot(b)) })
	return out
}

// ---- reads ----

// sortedRegs returns n's register values, the last-writer-wins winner
// first.
func sortedRegs(n *node) []regEntry {
	es := slices.Clone(n.regs)
	slices.SortFunc(es, func(a, b regEntry) int { return regCompare(b.d, b.reg, a.d, a.reg) })
	return es
}

// candidates returns what n may read as, the winner first: its members as
// an object (when it has children), its set, its counter, then its
// register values from the last writer down. A {} register value merges
// into an object instead of competing with it. The root is always an object.
func candidates(n *node, root bool) []string {
	if root {
		return []string{objectJSON(n)}
	}
	var out []string
	if len(n.kids) > 0 {
		out = append(out, objectJSON(n))
	}
	if len(n.elems) > 0 {
		out = append(out, setJSON(n))
	}
	if len(n.cnts) > 0 {
		out = append(out, counterSum(n).String())
	}
	for _, e := range sortedRegs(n) {
		if len(n.kids) == 0 || e.val != emptyObject {
			out = append(out, e.val)
		}
	}
	return out
}

// valueJSON returns the winner of candidates(n, false).
func valueJSON(n *node) string {
	switch {
	case len(n.kids) > 0:
		return objectJSON(n)
	case len(n.elems) > 0:
		return setJSON(n)
	case len(n.cnts) > 0:
		return counterSum(n).String()
	}
	best := n.regs[0]
	for _, e := range n.regs[1:] {
		if regCompare(e.d, e.reg, best.d, best.reg) > 0 {
			best = e
		}
	}
	return best.val
}

func objectJSON(n *node) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, seg := range slices.Sorted(maps.Keys(n.kids)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendQuoted(nil, seg))
		b.WriteByte(':')
		b.WriteString(valueJSON(n.kids[seg]))
	}
	b.WriteByte('}')
	return b.String()
}

// setElems returns n's elements sorted bytewise.
func setElems(n *node) []string { return slices.Sorted(maps.Keys(n.elems)) }

func setJSON(n *node) string { return "[" + strings.Join(setElems(n), ",") + "]" }

// counterSum adds the running totals of n's counter, exactly.
func counterSum(n *node) *big.Int {
	sum := new(big.Int)
	var v big.Int
	for _, c := range n.cnts {
		sum.Add(sum, v.SetInt64(c.total))
	}
	return sum
}

func clampInt64(b *big.Int) int64 {
	switch {
	case b.IsInt64():
		return b.Int64()
	case b.Sign() > 0:
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}

// leafPaths returns the paths of every node holding an entry, sorted.
func (s *state) leafPaths() []string {
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n.hasEntries() {
			out = append(out, n.path())
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(s.root)
	slices.Sort(out)
	return out
}
