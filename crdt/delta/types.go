package delta

import (
	"encoding/json"
)

// The three value types on their own. Each is the dot store a path of a
// [Doc] holds, with a causal context of its own: mutators take the
// replica, return a delta of the same type and change nothing; Join is the
// only way state changes. As with Doc, join each delta before the next
// mutator of the same replica. The zero value of each is empty and ready.
//
// These are the building blocks for code that wants one value rather than
// a document; the network layer replicates documents.

// slot is the path each standalone type keeps its entries at.
var slot = []string{"v"}

func mutateAs(replica string, f func() (*state, *Context, error)) (*state, error) {
	if err := checkID(replica); err != nil {
		return nil, err
	}
	x, _, err := f()
	return x, err
}

// MVRegister is a multi-value register: a write replaces the values its
// replica has seen, and values written concurrently are all kept until a
// later write replaces them. Get reads it as last-writer-wins by (Lamport
// time, replica ID); Values returns every concurrent value. Values are
// stored whole, objects included.
type MVRegister struct{ st *state }

func (r *MVRegister) state() *state {
	if r.st == nil {
		r.st = newState()
	}
	return r.st
}

// Write returns the delta that sets the register to v on replica.
func (r *MVRegister) Write(replica string, v json.RawMessage) (*MVRegister, error) {
	c, err := canonicalJSON(v)
	if err != nil {
		return nil, err
	}
	x, err := mutateAs(replica, func() (*state, *Context, error) {
		return r.state().opSet(replica, slot, []leaf{{segs: slot, val: c}})
	})
	if err != nil {
		return nil, err
	}
	return &MVRegister{st: x}, nil
}

// Get returns the last-writer-wins value: the greatest (Lamport time,
// replica ID) among the concurrent values. False when never written.
func (r *MVRegister) Get() (json.RawMessage, bool) {
	vs := r.Values()
	if len(vs) == 0 {
		return nil, false
	}
	return vs[0], true
}

// Values returns every concurrent value, Get's first.
func (r *MVRegister) Values() []json.RawMessage {
	n := r.state().find(slot)
	if n == nil {
		return nil
	}
	var out []json.RawMessage
	for _, e := range sortedRegs(n) {
		out = append(out, json.RawMessage(e.val))
	}
	return out
}

// Join merges o into r.
func (r *MVRegister) Join(o *MVRegister) {
	if o != nil && o != r {
		r.state().join(o.state())
	}
}

// Context returns a copy of r's causal context.
func (r *MVRegister) Context() *Context { return r.state().ctx.Clone() }

// Clone returns a deep copy of r.
func (r *MVRegister) Clone() *MVRegister { return &MVRegister{st: r.state().clone()} }

// Equal reports whether r and o hold the same state.
func (r *MVRegister) Equal(o *MVRegister) bool { return r.state().equal(o.state()) }

// ORSet is an observed-remove (add-wins) set of JSON values: Remove takes
// out the additions its replica has seen, so an addition concurrent with a
// removal survives. Elements are compared by canonical JSON (see the
// package documentation).
type ORSet struct{ st *state }

func (s *ORSet) state() *state {
	if s.st == nil {
		s.st = newState()
	}
	return s.st
}

// Add returns the delta that adds elem on replica.
func (s *ORSet) Add(replica string, elem json.RawMessage) (*ORSet, error) {
	e, err := canonicalJSON(elem)
	if err != nil {
		return nil, err
	}
	x, err := mutateAs(replica, func() (*state, *Context, error) { return s.state().opAdd(replica, slot, e) })
	if err != nil {
		return nil, err
	}
	return &ORSet{st: x}, nil
}

// Remove returns the delta that removes elem on replica.
func (s *ORSet) Remove(replica string, elem json.RawMessage) (*ORSet, error) {
	e, err := canonicalJSON(elem)
	if err != nil {
		return nil, err
	}
	x, err := mutateAs(replica, func() (*state, *Context, error) { return s.state().opRemove(replica, slot, e) })
	if err != nil {
		return nil, err
	}
	return &ORSet{st: x}, nil
}

// Contains reports whether elem is in s.
func (s *ORSet) Contains(elem json.RawMessage) bool {
	e, err := canonicalJSON(elem)
	if err != nil {
		return false
	}
	n := s.state().find(slot)
	return n != nil && len(n.elems[e]) > 0
}

// Elements returns the elements of s as canonical JSON, sorted bytewise.
func (s *ORSet) Elements() []json.RawMessage {
	n := s.state().find(slot)
	if n == nil {
		return nil
	}
	var out []json.RawMessage
	for _, e := range setElems(n) {
		out = append(out, json.RawMessage(e))
	}
	return out
}

// Join merges o into s.
func (s *ORSet) Join(o *ORSet) {
	if o != nil && o != s {
		s.state().join(o.state())
	}
}

// Context returns a copy of s's causal context.
func (s *ORSet) Context() *Context { return s.state().ctx.Clone() }

// Clone returns a deep copy of s.
func (s *ORSet) Clone() *ORSet { return &ORSet{st: s.state().clone()} }

// Equal reports whether s and o hold the same state.
func (s *ORSet) Equal(o *ORSet) bool { return s.state().equal(o.state()) }

// PNCounter is a counter that goes up and down, in the causal form of the
// paper: each replica's running total sits at one dot, which its next
// increment replaces, so the state holds one entry per replica that has
// counted, and the value is the sum of the totals.
type PNCounter struct{ st *state }

func (c *PNCounter) state() *state {
	if c.st == nil {
		c.st = newState()
	}
	return c.st
}

// Incr returns the delta that adds by (negative to decrement) on replica.
// The replica's own total must stay within int64 ([ErrOverflow]).
func (c *PNCounter) Incr(replica string, by int64) (*PNCounter, error) {
	x, err := mutateAs(replica, func() (*state, *Context, error) { return c.state().opIncr(replica, slot, by) })
	if err != nil {
		return nil, err
	}
	return &PNCounter{st: x}, nil
}

// Value returns the sum of every replica's total, clamped to the int64
// range.
func (c *PNCounter) Value() int64 {
	n := c.state().find(slot)
	if n == nil {
		return 0
	}
	return clampInt64(counterSum(n))
}

// Join merges o into c.
func (c *PNCounter) Join(o *PNCounter) {
	if o != nil && o != c {
		c.state().join(o.state())
	}
}

// Context returns a copy of c's causal context.
func (c *PNCounter) Context() *Context { return c.state().ctx.Clone() }

// Clone returns a deep copy of c.
func (c *PNCounter) Clone() *PNCounter { return &PNCounter{st: c.state().clone()} }

// Equal reports whether c and o hold the same state.
func (c *PNCounter) Equal(o *PNCounter) bool { return c.state().equal(o.state()) }
