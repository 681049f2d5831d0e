package taskswarm

import (
	"cmp"
	"slices"
)

// candidate is an acceptor offered work.
type candidate struct {
	agent string
	caps  []string
	load  int // open sub-tasks across all swarms
}

// plan assigns the sub-tasks todo (indexes into subs) to acceptors, by
// declared capability and current load (requirement 8.2, property 26):
//
//  1. acceptors are taken least loaded first (then by address);
//  2. a maximum matching gives as many acceptors as possible one distinct
//     sub-task each that they are capable of (augmenting paths, so an
//     acceptor once matched stays matched);
//  3. each remaining sub-task goes to the capable matched acceptor with the
//     lowest load, counting what it was just given;
//  4. acceptors left unmatched are released (they would have nothing to do).
//
// A sub-task no acceptor can do is left out of assign (the caller recruits
// for it). Every acceptor in matched gets at least one sub-task.
func plan(subs []SubTask, todo []int, cands []candidate) (assign map[int]string, matched, released []string) {
	cands = slices.Clone(cands)
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.agent, b.agent))
	})
	owner := make(map[int]int, len(todo)) // sub-task index -> candidate index
	var try func(ci int, seen map[int]bool) bool
	try = func(ci int, seen map[int]bool) bool {
		for _, j := range todo {
			if seen[j] || !capable(cands[ci].caps, subs[j].RequiredCapabilities) {
				continue
			}
			seen[j] = true
			if o, taken := owner[j]; !taken || try(o, seen) {
				owner[j] = ci
				return true
			}
		}
		return false
	}
	for ci := range cands {
		try(ci, map[int]bool{})
	}
	assign = make(map[int]string, len(todo))
	load := make([]int, len(cands))
	isMatched := make([]bool, len(cands))
	for j, ci := range owner {
		assign[j] = cands[ci].agent
		isMatched[ci] = true
		load[ci] = cands[ci].load + 1
	}
	for _, j := range todo {
		if _, ok := assign[j]; ok {
			continue
		}
		best := -1
		for ci := range cands {
			if !isMatched[ci] || !capable(cands[ci].caps, subs[j].RequiredCapabilities) {
				continue
			}
			if best < 0 || load[ci] < load[best] {
				best = ci
			}
		}
		if best >= 0 {
			assign[j] = cands[best].agent
			load[best]++
		}
	}
	for ci, c := range cands {
		if isMatched[ci] {
			matched = append(matched, c.agent)
		} else {
			released = append(released, c.agent)
		}
	}
	return assign, matched, released
}
