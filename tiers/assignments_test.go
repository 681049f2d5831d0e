package tiers_test

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/tiers"
)

// seedAssignments is DEFAULT_TIER_ASSIGNMENTS copied from seed 000, in the
// seed's order.
var seedAssignments = []struct {
	id   string
	tier tiers.Tier
}{
	{"sun", 0},
	{"mercury", 1}, {"earth", 1}, {"jupiter", 1},
	{"venus", 2}, {"mars", 2}, {"pluto", 2}, {"saturn", 2}, {"titan", 2},
	{"enceladus", 3}, {"ganymede", 3}, {"neptune", 3}, {"charon", 3}, {"uranus", 3},
	{"europa", 3}, {"mimas", 3}, {"io", 3}, {"triton", 3}, {"callisto", 3},
	{"atlas", 3}, {"andromeda", 3},
}

func TestDefaultAssignments(t *testing.T) {
	if got := len(tiers.DefaultAssignments); got != 21 {
		t.Errorf("len(DefaultAssignments) = %d, want 21", got)
	}
	for _, a := range seedAssignments {
		got, ok := tiers.DefaultAssignments[a.id]
		if !ok || got != a.tier {
			t.Errorf("DefaultAssignments[%q] = %v, %v; want %v", a.id, got, ok, a.tier)
		}
	}
	// Requirement 11.1: one L0, three L1, five L2, and the rest (12) L3.
	counts := map[tiers.Tier]int{}
	for id, tier := range tiers.DefaultAssignments {
		counts[tier]++
		if id != strings.ToLower(id) {
			t.Errorf("DefaultAssignments key %q is not lower-case", id)
		}
		if !tier.Valid() {
			t.Errorf("DefaultAssignments[%q] = %v is invalid", id, tier)
		}
	}
	want := map[tiers.Tier]int{tiers.L0: 1, tiers.L1: 3, tiers.L2: 5, tiers.L3: 12}
	for tier, n := range want {
		if counts[tier] != n {
			t.Errorf("%d agents at %v, want %d", counts[tier], tier, n)
		}
	}
}

func TestDefaultTier(t *testing.T) {
	for _, a := range seedAssignments {
		for _, id := range []string{a.id, strings.ToUpper(a.id), strings.ToUpper(a.id[:1]) + a.id[1:]} {
			got, ok := tiers.DefaultTier(id)
			if !ok || got != a.tier {
				t.Errorf("DefaultTier(%q) = %v, %v; want %v, true", id, got, ok, a.tier)
			}
		}
	}
	for _, id := range []string{"", "pluto2", "earth@12D3KooW", " sun", "ralph"} {
		if got, ok := tiers.DefaultTier(id); ok {
			t.Errorf("DefaultTier(%q) = %v, true; want false", id, got)
		}
	}
}
