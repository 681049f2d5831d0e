package discovery_test

import (
	"testing"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

// TestQuorumLookupFindsEveryHost: a provider query that stops at a quorum
// of answers still finds both hosts of a name two nodes use, so a bare
// name stays ambiguous where it is.
func TestQuorumLookupFindsEveryHost(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 8, slow)
	boot := []peer.AddrInfo{nodes[0].info(), nodes[3].info()}
	twins := []*testNode{
		newNode(t, boot, slow, []agentcard.Card{agentCard("twin", "echo")}),
		newNode(t, boot, slow, []agentcard.Card{agentCard("twin", "echo")}),
	}
	all := append(nodes, twins...)
	waitRoutingTables(t, all, 3)
	publishAll(t, all)
	for i, n := range nodes {
		cards, err := n.svc.FindByName(t.Context(), "twin")
		if err != nil || len(cards) != 2 || cards[0].Host == cards[1].Host {
			t.Fatalf("node %d: FindByName(twin) = %d cards, %v; want one from each twin", i, len(cards), err)
		}
	}
}

// TestLookupOfAHostThatDoesNotServe: a host in DHT client mode does not
// answer the direct GET_VALUE a lookup sends it first; the lookup reads
// its card from the DHT instead.
func TestLookupOfAHostThatDoesNotServe(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 6, slow)
	client := newNode(t, []peer.AddrInfo{nodes[0].info(), nodes[1].info()}, slow,
		[]agentcard.Card{agentCard("shy", "echo")}, discovery.WithMode(dht.ModeClient))
	waitRoutingTables(t, nodes, 3)
	waitRoutingTables(t, []*testNode{client}, 1)
	publishAll(t, append(nodes, client))
	for i, n := range nodes {
		cards, err := n.svc.FindByName(t.Context(), "shy")
		if err != nil || len(cards) != 1 || cards[0].Host != client.h.ID().String() {
			t.Fatalf("node %d: FindByName(shy) = %+v, %v", i, cards, err)
		}
	}
}

// TestCapabilityLookupTakesHeldCards: with the lookup cache off, a
// capability lookup still reads every matching host's index, but takes
// the cards it already holds at the revision the index lists instead of
// reading them again; a card whose host lists a new revision is read
// again, and the lookup returns the new one.
func TestCapabilityLookupTakesHeldCards(t *testing.T) {
	checkLeaks(t)
	tm := slow
	tm.cache = 0
	nodes := network(t, 6, tm, discovery.WithRosterInterval(0))
	waitRoutingTables(t, nodes, 3)
	publishAll(t, nodes)
	q := nodes[0]
	if cards, err := q.svc.FindByCapability(t.Context(), "echo"); err != nil || len(cards) != len(nodes)-1 {
		t.Fatalf("first FindByCapability(echo) = %d cards, %v", len(cards), err)
	}
	before := q.svc.Stats().CacheHits
	if cards, err := q.svc.FindByCapability(t.Context(), "echo"); err != nil || len(cards) != len(nodes)-1 {
		t.Fatalf("second FindByCapability(echo) = %d cards, %v", len(cards), err)
	}
	if got := q.svc.Stats().CacheHits - before; got != uint64(len(nodes)-1) {
		t.Fatalf("second lookup took %d held cards, want %d", got, len(nodes)-1)
	}

	c, err := nodes[1].reg.Register(agentCard(agentName(1), "echo", "later"))
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, nodes[1:2])
	before = q.svc.Stats().CacheHits
	cards, err := q.svc.FindByCapability(t.Context(), "echo")
	if err != nil || len(cards) != len(nodes)-1 {
		t.Fatalf("FindByCapability(echo) after an update = %d cards, %v", len(cards), err)
	}
	for _, got := range cards {
		if got.Address() == c.Address() && got.Revision != c.Revision {
			t.Fatalf("lookup returned %s at revision %d, want %d", c.Address(), got.Revision, c.Revision)
		}
	}
	if got := q.svc.Stats().CacheHits - before; got != uint64(len(nodes)-2) {
		t.Fatalf("lookup after an update took %d held cards, want %d", got, len(nodes)-2)
	}
}
