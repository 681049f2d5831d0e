package taskswarm

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPlan: every matched acceptor gets a sub-task it can do, no two share
// one matched sub-task, the matching is maximal (no released acceptor could
// do a sub-task left to a busier matched acceptor alone... is checked as:
// no released acceptor can do a sub-task nobody was assigned), and every
// sub-task some acceptor can do is assigned.
func TestPlan(t *testing.T) {
	capsGen := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "d"}), 0, 3, rapid.ID[string])
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "subTasks")
		subs := make([]SubTask, n)
		todo := make([]int, n)
		for i := range subs {
			subs[i] = SubTask{ID: fmt.Sprint(i), RequiredCapabilities: rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "d"}), 0, 2, rapid.ID[string]).Draw(t, "need")}
			todo[i] = i
		}
		k := rapid.IntRange(1, 8).Draw(t, "acceptors")
		cands := make([]candidate, k)
		for i := range cands {
			cands[i] = candidate{agent: fmt.Sprintf("ag%d", i), caps: capsGen.Draw(t, "caps"), load: rapid.IntRange(0, 3).Draw(t, "load")}
		}
		assign, matched, released := plan(subs, todo, cands)
		if len(matched)+len(released) != k {
			t.Fatalf("matched %v released %v of %d", matched, released, k)
		}
		held := map[string]int{}
		for j, a := range assign {
			held[a]++
			c := cands[slices.IndexFunc(cands, func(c candidate) bool { return c.agent == a })]
			if !capable(c.caps, subs[j].RequiredCapabilities) {
				t.Fatalf("sub-task %d given to %s who cannot do it", j, a)
			}
			if !slices.Contains(matched, a) {
				t.Fatalf("sub-task %d given to unmatched %s", j, a)
			}
		}
		for _, a := range matched {
			if held[a] == 0 {
				t.Fatalf("matched %s holds nothing", a)
			}
		}
		for j := range subs {
			if _, ok := assign[j]; ok {
				continue
			}
			for _, c := range cands {
				if capable(c.caps, subs[j].RequiredCapabilities) {
					t.Fatalf("sub-task %d unassigned though %s can do it", j, c.agent)
				}
			}
		}
		// Maximum: each released acceptor can only do sub-tasks whose
		// holder would lose its only sub-task (a simple necessary check: a
		// released acceptor cannot do a sub-task held by someone with two).
		for _, r := range released {
			c := cands[slices.IndexFunc(cands, func(c candidate) bool { return c.agent == r })]
			for j, a := range assign {
				if held[a] > 1 && capable(c.caps, subs[j].RequiredCapabilities) {
					t.Fatalf("released %s could take sub-task %d from %s, who holds %d", r, j, a, held[a])
				}
			}
		}
	})
}
