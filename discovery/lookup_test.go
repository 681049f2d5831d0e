package discovery_test

import (
	"encoding/binary"
	"testing"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	lpnet "github.com/libp2p/go-libp2p/core/network"
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

// uncachedSwarm is six published nodes with the lookup cache and the
// roster off, so every capability lookup asks the network, and checks
// for leaked goroutines at the end.
func uncachedSwarm(t *testing.T) []*testNode {
	t.Helper()
	checkLeaks(t)
	tm := slow
	tm.cache = 0
	nodes := network(t, 6, tm, discovery.WithRosterInterval(0))
	waitRoutingTables(t, nodes, 3)
	publishAll(t, nodes)
	return nodes
}

// TestCapabilityLookupTakesHeldCards: with the lookup cache off, a
// capability lookup still reads every matching host's index, but takes
// the cards it already holds at the revision the index lists instead of
// reading them again; a card whose host lists a new revision is read
// again, and the lookup returns the new one.
func TestCapabilityLookupTakesHeldCards(t *testing.T) {
	nodes := uncachedSwarm(t)
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

// serveAs makes n answer RecordsProtocol requests with count, then recs,
// whatever it was asked, as a broken or malicious node would.
func serveAs(n *testNode, count uint64, recs ...[]byte) {
	n.h.SetStreamHandler(discovery.RecordsProtocol, func(st lpnet.Stream) {
		defer st.Close()
		b := binary.AppendUvarint(nil, count)
		for _, r := range recs {
			b = binary.AppendUvarint(b, uint64(len(r)))
			b = append(b, r...)
		}
		_, _ = st.Write(b)
	})
}

// TestCapabilityLookupReadsServedRecords: a capability lookup reads each
// provider's index and matching cards in one request on RecordsProtocol;
// a provider that does not speak it, serves a forged card, another
// host's records or more records than allowed is read with GET_VALUE
// instead, and every
// lookup returns only the genuine cards, one per provider.
func TestCapabilityLookupReadsServedRecords(t *testing.T) {
	nodes := uncachedSwarm(t)
	q := nodes[0]
	check := func(what string) {
		t.Helper()
		q.svc.ForgetCards()
		cards, err := q.svc.FindByCapability(t.Context(), "echo")
		if err != nil || len(cards) != len(nodes)-1 {
			t.Fatalf("%s: FindByCapability(echo) = %d cards, %v", what, len(cards), err)
		}
		for _, c := range cards {
			if c.Host == q.h.ID().String() || c.Address() != c.ID+"@"+c.Host {
				t.Fatalf("%s: card %s", what, c.Address())
			}
		}
	}
	check("every provider serving")
	for i, n := range nodes[1:] {
		if n.svc.Stats().Served == 0 {
			t.Fatalf("node %d served no request", i+1)
		}
	}

	nodes[1].h.RemoveStreamHandler(discovery.RecordsProtocol)
	check("a provider without the protocol")

	ix, err := nodes[2].svc.DHT().GetValue(t.Context(), discovery.IndexKey(nodes[2].h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := genKey(t)
	forged := agentCard(agentName(2), "echo")
	forged.Host = nodes[2].h.ID().String()
	serveAs(nodes[2], 2, ix, forge(t, forged, other))
	check("a provider serving a forged card")

	serveAs(nodes[3], 1<<20, ix)
	check("a provider serving too many records")
	serveAs(nodes[4], 1, ix[:len(ix)/2])
	check("a provider serving a truncated index")

	// The index a provider serves is taken as its host's on the strength
	// of the connection, so it must be the provider's own.
	card2, err := nodes[2].svc.DHT().GetValue(t.Context(), agentcard.Key(nodes[2].h.ID(), agentName(2)))
	if err != nil {
		t.Fatal(err)
	}
	serveAs(nodes[1], 2, ix, card2)
	check("a provider serving another host's index and card")

	// A provider that serves its new index with the card it replaced:
	// the lookup reads the listed revision with GET_VALUE.
	p := nodes[5]
	oldCard, err := p.svc.DHT().GetValue(t.Context(), agentcard.Key(p.h.ID(), agentName(5)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.reg.Register(agentCard(agentName(5), "echo", "later"))
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, []*testNode{p})
	newIx, err := p.svc.DHT().GetValue(t.Context(), discovery.IndexKey(p.h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	serveAs(p, 2, newIx, oldCard)
	q.svc.ForgetCards()
	cards, err := q.svc.FindByCapability(t.Context(), "echo")
	if err != nil || len(cards) != len(nodes)-1 {
		t.Fatalf("FindByCapability(echo) = %d cards, %v", len(cards), err)
	}
	for _, got := range cards {
		if got.Address() == c.Address() && got.Revision != c.Revision {
			t.Fatalf("lookup returned %s at revision %d, want %d", c.Address(), got.Revision, c.Revision)
		}
	}
}
