//go:build soak

package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// swarmSize is the size of TestSwarm's network: 50 nodes, or 20 under
// the race detector (which slows libp2p down five to ten times) and with
// -short.
func swarmSize() int {
	if raceEnabled || testing.Short() {
		return 20
	}
	return 50
}

// TestSwarm runs 50 nodes on loopback (20 under -race or -short), each bootstrapped from three
// earlier ones (not a full mesh). Every node resolves every agent by
// capability and by name; a card update reaches every registry on the
// next refresh; a node that leaves disappears from every registry one TTL
// after its last heartbeat, although its DHT records linger, while the
// live nodes stay. Time is a shared clock that the test advances past the
// TTL (the loops' own timers are covered by TestLiveness), so the test
// waits for no timer.
func TestSwarm(t *testing.T) {
	checkLeaks(t)
	clk := &clock{}
	tm := slow
	tm.clock = clk
	start := time.Now()
	// Three concurrent requests per lookup instead of kad-dht's ten: on a
	// reachable loopback swarm it halves the CPU that 50 hosts on two cores
	// spend, without changing what is found.
	nodes := network(t, swarmSize(), tm, discovery.WithDHTOptions(dht.Concurrency(3)))
	waitRoutingTables(t, nodes, 8)
	publishAll(t, nodes)
	// Provides are not acknowledged: a publish returns once its
	// ADD_PROVIDER messages are sent, and a peer may not have stored them
	// yet. What is asserted below needs them stored.
	offers := map[string]func(i int) bool{"echo": func(int) bool { return true }}
	for j := range 5 {
		offers[fmt.Sprintf("skill-%d", j)] = func(i int) bool { return i%5 == j }
	}
	waitProvidersStored(t, nodes, offers)
	t.Logf("%d nodes up and published in %s", len(nodes), time.Since(start))

	// Every node resolves every agent by capability, then by name.
	start = time.Now()
	parallel(t, nodes, func(i int, n *testNode) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cards, err := n.svc.FindByCapability(ctx, "echo")
		if err != nil {
			return fmt.Errorf("FindByCapability(echo): %w", err)
		}
		if len(cards) != len(nodes)-1 {
			return fmt.Errorf("FindByCapability(echo) found %d agents, want %d", len(cards), len(nodes)-1)
		}
		skill := fmt.Sprintf("skill-%d", i%5)
		cards, err = n.svc.FindByCapability(ctx, skill)
		if err != nil || len(cards) != len(nodes)/5-1 {
			return fmt.Errorf("FindByCapability(%s) = %d agents, %v; want %d", skill, len(cards), err, len(nodes)/5-1)
		}
		for j, m := range nodes {
			if j == i {
				continue
			}
			cards, err := n.svc.FindByName(ctx, agentName(j))
			if err != nil {
				return fmt.Errorf("FindByName(%s): %w", agentName(j), err)
			}
			if len(cards) != 1 || cards[0].Host != m.h.ID().String() {
				return fmt.Errorf("FindByName(%s) = %v", agentName(j), cards)
			}
		}
		if got := len(n.reg.Remote()); got != len(nodes)-1 {
			return fmt.Errorf("registry holds %d remote cards, want %d", got, len(nodes)-1)
		}
		return nil
	})
	t.Logf("every node resolved every agent by capability and by name in %s", time.Since(start))

	// Node 0 updates its card, the last node leaves, and a TTL passes:
	// the live nodes publish (their heartbeat) and everyone refreshes. The
	// new revision is in every registry, the node that left is in none
	// (its DHT records linger, but their heartbeat is a TTL old), and
	// every live node is still in every registry.
	start = time.Now()
	c, err := nodes[0].reg.Register(agentCard(agentName(0), "echo", "skill-0", "new-skill"))
	if err != nil || c.Revision != 1 {
		t.Fatalf("Register(update) = rev %d, %v", c.Revision, err)
	}
	gone := nodes[len(nodes)-1]
	goneAddr := agentName(len(nodes)-1) + "@" + gone.h.ID().String()
	gone.close()
	nodes = nodes[:len(nodes)-1]
	clk.advance(tm.ttl + time.Second)
	publishAll(t, nodes)
	refreshAll(t, nodes)
	for i, n := range nodes {
		if i > 0 {
			got, ok := n.reg.Get(c.Address())
			if !ok || got.Revision != c.Revision || !got.HasCapability("new-skill") {
				t.Errorf("node %d has %s at revision %d after a refresh, want %d", i, c.Address(), got.Revision, c.Revision)
			}
		}
		if _, ok := n.reg.Get(goneAddr); ok {
			t.Errorf("node %d still lists %s one TTL after its last heartbeat", i, goneAddr)
		}
		if got := len(n.reg.Remote()); got != len(nodes)-1 {
			t.Errorf("node %d holds %d remote cards, want %d (the live nodes)", i, got, len(nodes)-1)
		}
	}
	if _, err := nodes[0].svc.Lookup(t.Context(), goneAddr); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Errorf("Lookup(%s) of a node gone for a TTL = %v, want AGENT_NOT_FOUND", goneAddr, err)
	}
	t.Logf("update, departure and a TTL handled in %s", time.Since(start))
}

// waitProvidersStored waits until the k (20) nodes closest to the key of
// each capability in offers, those a lookup asks, hold the provider
// record of every node that offers it (offers[capID](i)). A provide is
// not acknowledged, and one can miss a peer for good (seen under the race
// detector on two loaded cores: a publish that succeeded, and a closest
// node that still lacked the record a minute later); the republish loop
// mends that on its next round, every republish interval. So a node whose
// record some closest node still lacks after 5 s publishes again here, as
// that loop would, at most five times.
func waitProvidersStored(t *testing.T, nodes []*testNode, offers map[string]func(i int) bool) {
	t.Helper()
	index := map[peer.ID]int{}
	for i, n := range nodes {
		index[n.h.ID()] = i
	}
	var lacking map[int]bool // nodes whose record a closest node lacks
	stored := func() error {
		lacking = map[int]bool{}
		var first error
		for capID, offered := range offers {
			mh := discovery.KeyCID(discovery.CapabilityKey(swarm, capID)).Hash()
			closest := kb.SortClosestPeers(slices.Collect(maps.Keys(index)), kb.ConvertKey(string(mh)))
			for _, p := range closest[:min(len(closest), 20)] {
				provs, err := nodes[index[p]].svc.DHT().ProviderStore().GetProviders(t.Context(), mh)
				if err != nil {
					return err
				}
				for i, n := range nodes {
					if offered(i) && !slices.ContainsFunc(provs, func(ai peer.AddrInfo) bool { return ai.ID == n.h.ID() }) {
						lacking[i] = true
						if first == nil {
							first = fmt.Errorf("node %d does not hold node %d's provider record of %s", index[p], i, capID)
						}
					}
				}
			}
		}
		return first
	}
	for round := 1; ; round++ {
		err := waitfor.Within(5*time.Second, stored)
		if err == nil {
			return
		}
		if round > 5 {
			t.Fatal(err)
		}
		again := make([]*testNode, 0, len(lacking))
		for i := range lacking {
			again = append(again, nodes[i])
		}
		t.Logf("%v; %d nodes publish again", err, len(again))
		publishAll(t, again)
	}
}

// parallel runs f for every node, a few at a time, and fails t with every
// error.
func parallel(t *testing.T, nodes []*testNode, f func(i int, n *testNode) error) {
	t.Helper()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i, n)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
