package authority_test

import (
	"testing"
	"time"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/tiers"
)

// BenchmarkEffective assesses a card that two held grants cover: the cost
// every remote card pays on each store and reassessment.
func BenchmarkEffective(b *testing.B) {
	self, founder, host := identFrom(b, 1), identFrom(b, 2), identFrom(b, 3)
	book := authority.NewBook(self.id, founder.id, func() time.Time { return t0 })
	for i, g := range []authority.Grant{
		{Authority: founder.id, Serial: 1, Peer: host.id, MaxTier: tiers.L1, Sandboxes: []string{"lab"}, Expires: t0.Add(time.Hour)},
		{Authority: founder.id, Serial: 2, Peer: host.id, Agent: "io", MaxTier: tiers.L2, Capabilities: []string{"sum"}},
	} {
		if _, _, err := book.AddGrant(mustSealGrant(b, g, founder)); err != nil {
			b.Fatalf("grant %d: %v", i, err)
		}
	}
	c := card("io", host.id, tiers.L0, "lab", "sum")
	b.ReportAllocs()
	for b.Loop() {
		if got := book.Effective(c); got.Tier != tiers.L1 {
			b.Fatalf("held at %s", got.Tier)
		}
	}
}
