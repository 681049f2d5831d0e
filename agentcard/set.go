package agentcard

import "iter"

// setFew is how many entries a [set] keeps in a slice before it takes a
// map.
const setFew = 8

// set is the entries an index holds under one name (an agent id, a
// capability, a host). Most names index one entry, and a Go map of one
// entry costs a whole group of eight slots (about 380 bytes with this key),
// for every member of the swarm in two indexes; so a set is a slice
// while it is small and a map once it has more than [setFew] entries. A
// nil set is empty.
type set struct {
	few  []slot
	many map[key]*entry
}

type slot struct {
	k key
	e *entry
}

func (s *set) len() int {
	if s == nil {
		return 0
	}
	if s.many != nil {
		return len(s.many)
	}
	return len(s.few)
}

// add stores e under k, replacing what k held.
func (s *set) add(k key, e *entry) {
	if s.many != nil {
		s.many[k] = e
		return
	}
	for i := range s.few {
		if s.few[i].k == k {
			s.few[i].e = e
			return
		}
	}
	if len(s.few) < setFew {
		s.few = append(s.few, slot{k, e})
		return
	}
	s.many = make(map[key]*entry, 2*setFew)
	for _, sl := range s.few {
		s.many[sl.k] = sl.e
	}
	s.many[k] = e
	s.few = nil
}

// del removes k, if held.
func (s *set) del(k key) {
	if s.many != nil {
		delete(s.many, k)
		return
	}
	for i := range s.few {
		if s.few[i].k == k {
			last := len(s.few) - 1
			s.few[i] = s.few[last]
			s.few[last] = slot{}
			s.few = s.few[:last]
			return
		}
	}
}

// all yields every entry with its key, once. The loop's body may delete
// the entry it was given (the slice is walked from its end, so the swap
// that deletes moves an entry already yielded into its place) and nothing
// else: deleting another entry could move one already yielded to where it
// is yielded again, and an add could turn the slice into a map.
func (s *set) all() iter.Seq2[key, *entry] {
	return func(yield func(key, *entry) bool) {
		if s == nil {
			return
		}
		if s.many != nil {
			for k, e := range s.many {
				if !yield(k, e) {
					return
				}
			}
			return
		}
		for i := len(s.few) - 1; i >= 0; i-- {
			if i >= len(s.few) {
				continue // a body that deleted more than its own entry: no index past the end
			}
			if !yield(s.few[i].k, s.few[i].e) {
				return
			}
		}
	}
}

func index[N comparable](m map[N]*set, name N, k key, e *entry) {
	s := m[name]
	if s == nil {
		s = &set{}
		m[name] = s
	}
	s.add(k, e)
}

func unindex[N comparable](m map[N]*set, name N, k key) {
	if s := m[name]; s != nil {
		s.del(k)
		if s.len() == 0 {
			delete(m, name)
		}
	}
}
