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
