package discovery

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
)

// TestRetainDropsOnlyTheHostsUnlistedCards: a host's roster message drops
// from the lookup cache that host's cards its index no longer lists, and
// nothing of another host's; the per-host index the drop walks stays in
// step with the cache through puts, drops and a clear.
func TestRetainDropsOnlyTheHostsUnlistedCards(t *testing.T) {
	a, b := newPeerID(t), newPeerID(t)
	s := &Service{cache: newCache(), sink: agentcard.NewRegistry(""), log: &log.SugaredLogger}
	put := func(agent string, host peer.ID) {
		c := agentcard.Card{ID: agent, Host: host.String()}
		s.cache.putCard(c.Address(), &cardEntry{card: c})
	}
	put("kept", a)
	put("gone", a)
	put("gone", b) // same name, other host: stays
	put("other", b)

	s.retain(a, Index{Host: a, Agents: []IndexEntry{{ID: "kept"}}})
	want := map[string]bool{"kept@" + a.String(): true, "gone@" + b.String(): true, "other@" + b.String(): true}
	check := func(want map[string]bool) {
		t.Helper()
		if len(s.cache.cards) != len(want) {
			t.Fatalf("cache holds %d cards, want %d: %v", len(s.cache.cards), len(want), s.cache.cards)
		}
		n := 0
		for host, set := range s.cache.byHost {
			if len(set) == 0 {
				t.Errorf("host %s has an empty set in the index", host)
			}
			for _, addr := range set {
				n++
				e := s.cache.cards[addr]
				if e == nil || e.card.Host != host {
					t.Errorf("index lists %s under %s, cache holds %+v", addr, host, e)
				}
			}
		}
		for addr := range want {
			if s.cache.cards[addr] == nil {
				t.Errorf("cache lost %s", addr)
			}
		}
		if n != len(want) {
			t.Errorf("index lists %d cards, want %d", n, len(want))
		}
	}
	check(want)

	s.retain(b, Index{Host: b})
	check(map[string]bool{"kept@" + a.String(): true})
	s.cache.dropCard("kept@" + a.String())
	s.cache.dropCard("never@" + a.String()) // not cached: nothing happens
	check(map[string]bool{})
	put("again", a)
	s.cache.clearCards()
	check(map[string]bool{})
}

// BenchmarkRetain times what a roster message's retain costs on a node
// whose lookup cache holds one card from each of -nova.retainhosts hosts
// (every member of a swarm that size): the host's cards are found through
// the per-host index, so the cost does not grow with the swarm.
//
//	go test -run '^$' -bench BenchmarkRetain ./discovery/
func BenchmarkRetain(b *testing.B) {
	for _, hosts := range []int{100, 1000} {
		b.Run(fmt.Sprint(hosts), func(b *testing.B) {
			s := &Service{cache: newCache(), sink: agentcard.NewRegistry(""), log: &log.SugaredLogger}
			ids := make([]peer.ID, hosts)
			for i := range ids {
				ids[i] = newPeerID(b)
				c := agentcard.Card{ID: "a", Host: ids[i].String()}
				s.cache.putCard(c.Address(), &cardEntry{card: c})
			}
			ix := Index{Agents: []IndexEntry{{ID: "a"}}}
			i := 0
			for b.Loop() {
				ix.Host = ids[i%hosts]
				s.retain(ix.Host, ix)
				i++
			}
		})
	}
}

// newPeerID returns the ID of a fresh Ed25519 key.
func newPeerID(tb testing.TB) peer.ID {
	tb.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
