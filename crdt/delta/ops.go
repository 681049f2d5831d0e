package delta

import (
	"math"
	"math/big"
)

// The delta mutators of the dot store. Each reads s and builds a delta: the
// new entries, their fresh dots, and the dots of the entries they replace
// (and nothing else) as its context. None changes s. Every mutator mints at
// least one dot, even one that only removes, so that any update advances
// the replica's clock and a peer that missed it can tell.

// mutation is a delta under construction.
type mutation struct {
	replica string
	x       *state
	minted  Context
	seq     uint64 // the last sequence number taken
}

func (s *state) begin(replica string) *mutation {
	return &mutation{replica: replica, x: newState(), seq: s.ctx.Max(replica)}
}

// mint takes the next dot of the replica.
func (m *mutation) mint() (Dot, error) {
	if m.seq == math.MaxUint64 {
		return Dot{}, ErrOverflow
	}
	m.seq++
	d := Dot{Replica: m.replica, Seq: m.seq}
	m.minted.Add(d)
	m.x.ctx.Add(d)
	return d, nil
}

// observe adds the dots of replaced entries to the delta's context.
func (m *mutation) observe(ds []Dot) {
	for _, d := range ds {
		m.x.ctx.Add(d)
	}
}

func (m *mutation) done() (*state, *Context, error) { return m.x, &m.minted, nil }

// locate returns the node at segs, or nil, and the nodes on the way to it
// (strict ancestors that exist, the root excluded).
func (s *state) locate(segs []string) (*node, []*node) {
	var anc []*node
	n := s.root
	for _, seg := range segs {
		if n != s.root {
			anc = append(anc, n)
		}
		if n = n.kids[seg]; n == nil {
			return nil, anc
		}
	}
	return n, anc
}

// ancestorConflicts appends what a write below anc replaces there: every
// entry except {} register values, which only say "this is an object".
func ancestorConflicts(anc []*node, out []Dot) []Dot {
	for _, a := range anc {
		for _, e := range a.regs {
			if e.val != emptyObject {
				out = append(out, e.d)
			}
		}
		for _, ds := range a.elems {
			for d := range ds {
				out = append(out, d)
			}
		}
		for _, e := range a.cnts {
			out = append(out, e.d)
		}
	}
	return out
}

func kidsDots(n *node, out []Dot) []Dot {
	for _, k := range n.kids {
		out = subtreeDots(k, out)
	}
	return out
}

func tick(l uint64) uint64 {
	if l == math.MaxUint64 {
		return l
	}
	return l + 1
}

// opSet writes leaves, all at or below segs, each a register value with a
// fresh dot and the next Lamport time; it replaces everything at and below
// segs, and the non-object entries of segs' ancestors.
func (s *state) opSet(replica string, segs []string, leaves []leaf) (*state, *Context, error) {
	target, anc := s.locate(segs)
	var obs []Dot
	if target != nil {
		obs = subtreeDots(target, obs)
	}
	obs = ancestorConflicts(anc, obs)
	m := s.begin(replica)
	lam := tick(s.lamport)
	for _, lf := range leaves {
		d, err := m.mint()
		if err != nil {
			return nil, nil, err
		}
		m.x.putReg(m.x.ensure(lf.segs), d, reg{lamport: lam, val: lf.val})
	}
	if len(leaves) == 0 {
		if _, err := m.mint(); err != nil {
			return nil, nil, err
		}
	}
	m.x.lamport = lam
	m.observe(obs)
	return m.done()
}

// opDelete removes everything at and below segs.
func (s *state) opDelete(replica string, segs []string) (*state, *Context, error) {
	target, _ := s.locate(segs)
	var obs []Dot
	if target != nil {
		obs = subtreeDots(target, obs)
	}
	m := s.begin(replica)
	if _, err := m.mint(); err != nil {
		return nil, nil, err
	}
	m.observe(obs)
	return m.done()
}

// opAdd adds elem to the set at segs: a fresh dot replaces elem's earlier
// dots there, and the register and counter at segs, everything below and
// the non-object entries above are replaced.
func (s *state) opAdd(replica string, segs []string, elem string) (*state, *Context, error) {
	target, anc := s.locate(segs)
	var obs []Dot
	if target != nil {
		for _, e := range target.regs {
			obs = append(obs, e.d)
		}
		for _, e := range target.cnts {
			obs = append(obs, e.d)
		}
		for d := range target.elems[elem] {
			obs = append(obs, d)
		}
		obs = kidsDots(target, obs)
	}
	obs = ancestorConflicts(anc, obs)
	m := s.begin(replica)
	d, err := m.mint()
	if err != nil {
		return nil, nil, err
	}
	m.x.putElem(m.x.ensure(segs), elem, d)
	m.observe(obs)
	return m.done()
}

// opRemove removes the dots of elem that s holds at segs.
func (s *state) opRemove(replica string, segs []string, elem string) (*state, *Context, error) {
	target, _ := s.locate(segs)
	var obs []Dot
	if target != nil {
		for d := range target.elems[elem] {
			obs = append(obs, d)
		}
	}
	m := s.begin(replica)
	if _, err := m.mint(); err != nil {
		return nil, nil, err
	}
	m.observe(obs)
	return m.done()
}

// opIncr adds by to the replica's running total of the counter at segs
// (the causal counter of the paper): one fresh dot carries the new total
// and replaces the replica's earlier dots there; the register and set at
// segs, everything below and the non-object entries above are replaced.
func (s *state) opIncr(replica string, segs []string, by int64) (*state, *Context, error) {
	target, anc := s.locate(segs)
	var obs []Dot
	total := big.NewInt(by)
	if target != nil {
		for _, e := range target.regs {
			obs = append(obs, e.d)
		}
		for _, ds := range target.elems {
			for d := range ds {
				obs = append(obs, d)
			}
		}
		var v big.Int
		for _, e := range target.cnts {
			if e.d.Replica == replica {
				obs = append(obs, e.d)
				total.Add(total, v.SetInt64(e.total))
			}
		}
		obs = kidsDots(target, obs)
	}
	if !total.IsInt64() {
		return nil, nil, ErrOverflow
	}
	obs = ancestorConflicts(anc, obs)
	m := s.begin(replica)
	d, err := m.mint()
	if err != nil {
		return nil, nil, err
	}
	m.x.putCnt(m.x.ensure(segs), d, total.Int64())
	m.observe(obs)
	return m.done()
}
