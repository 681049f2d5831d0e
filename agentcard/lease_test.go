package agentcard_test

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
)

// TestLeaseHoldsOnlyWhileLookupsAgree drives a registry through random
// registrations, merges, removals and clock advances, taking leases on
// random successful lookups as it goes. Whenever a lease still holds, the
// lookup it vouched for must return exactly what it returned then; and a
// lease taken on an unchanged registry holds.
func TestLeaseHoldsOnlyWhileLookupsAgree(t *testing.T) {
	nodes := testNodes(t)
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		self := nodes[0].id
		r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(time.Minute))
		ids := []string{"sun", "mars", "io"}
		hosts := []int{1, 2}
		addr := func(t *rapid.T) string {
			id := rapid.SampledFrom(ids).Draw(t, "id")
			switch rapid.IntRange(0, 2).Draw(t, "form") {
			case 0:
				return id
			case 1:
				return id + "@" + self.String()
			}
			return id + "@" + nodes[rapid.SampledFrom(hosts).Draw(t, "host")].id.String()
		}
		type held struct {
			lease agentcard.Lease
			addr  string
			card  agentcard.Card
			a     string
			err   error
		}
		var leases []held
		lookup := func(a string) (agentcard.Card, string, error) {
			c, ca, err := r.ResolveShared(a)
			return c, ca, err
		}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				c := sampleCard(rapid.SampledFrom(ids).Draw(t, "id"))
				c.Description = rapid.SampledFrom([]string{"a", "b"}).Draw(t, "desc")
				if _, err := r.Register(c); err != nil {
					t.Fatal(err)
				}
			case 1:
				h := nodes[rapid.SampledFrom(hosts).Draw(t, "host")].id
				rev := rapid.Uint64Range(1, 3).Draw(t, "rev")
				if _, err := r.MergeRemote(remoteCard(rapid.SampledFrom(ids).Draw(t, "id"), h, rev)); err != nil {
					t.Fatal(err)
				}
			case 2:
				r.RemoveRemote(addr(t))
			case 3:
				r.Unregister(rapid.SampledFrom(ids).Draw(t, "id"))
			case 4:
				clock.Advance(time.Duration(rapid.IntRange(0, 90).Draw(t, "secs")) * time.Second)
			case 5:
				a := addr(t)
				l := r.Lease()
				c, ca, err := lookup(a)
				if err != nil {
					break // a lease vouches for cards found, not for failures
				}
				l = r.For(l, &c)
				if !r.Holds(l) {
					t.Fatalf("a lease taken on an unchanged registry does not hold")
				}
				leases = append(leases, held{l, a, c, ca, err})
			}
			for _, h := range leases {
				if !r.Holds(h.lease) {
					continue
				}
				c, ca, err := lookup(h.addr)
				c.LastSeenAt = h.card.LastSeenAt // a refresh moves it forward, in place
				if ca != h.a || !reflect.DeepEqual(c, h.card) || err != nil {
					t.Fatalf("lease on %q holds, but the lookup changed: %q %v -> %q %v", h.addr, h.a, h.err, ca, err)
				}
			}
		}
	})
}
