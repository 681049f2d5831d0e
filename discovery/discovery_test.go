package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/waitfor"
)

func TestNewRefusesBadArguments(t *testing.T) {
	checkLeaks(t)
	h, key := newHost(t)
	t.Cleanup(func() { h.Close() })
	other, _, _ := crypto.GenerateEd25519Key(nil)
	reg := agentcard.NewRegistry(h.ID())
	for name, f := range map[string]func() (*discovery.Service, error){
		"nil host":    func() (*discovery.Service, error) { return discovery.New(nil, key, swarm, reg, reg) },
		"nil key":     func() (*discovery.Service, error) { return discovery.New(h, nil, swarm, reg, reg) },
		"foreign key": func() (*discovery.Service, error) { return discovery.New(h, other, swarm, reg, reg) },
		"bad swarm":   func() (*discovery.Service, error) { return discovery.New(h, key, "Bad/Swarm", reg, reg) },
		"nil source":  func() (*discovery.Service, error) { return discovery.New(h, key, swarm, nil, reg) },
		"nil sink":    func() (*discovery.Service, error) { return discovery.New(h, key, swarm, reg, nil) },
		"slow heartbeat": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithTTL(time.Minute), discovery.WithRepublishInterval(31*time.Second))
		},
		"slow refresh": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithTTL(time.Minute), discovery.WithRepublishInterval(10*time.Second), discovery.WithRefreshInterval(time.Minute))
		},
		"zero TTL": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithTTL(0))
		},
		"bad retry": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithRetry(3, 0))
		},
		"bad mode": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithMode(42))
		},
		"peer sans addr": func() (*discovery.Service, error) {
			return discovery.New(h, key, swarm, reg, reg, discovery.WithBootstrapPeers([]peer.AddrInfo{{ID: h.ID()}}))
		},
	} {
		if s, err := f(); err == nil || s != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, s, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	checkLeaks(t)
	h, key := newHost(t)
	t.Cleanup(func() { h.Close() })
	reg := agentcard.NewRegistry(h.ID())
	s, err := discovery.New(h, key, swarm, reg, reg, discovery.WithMDNS(false), discovery.WithLogger(nopLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if s.DHT() != nil {
		t.Fatal("New created the DHT")
	}
	if err := s.Publish(ctx); !errors.Is(err, discovery.ErrNotStarted) {
		t.Fatalf("Publish before Start = %v", err)
	}
	if _, err := s.FindByName(ctx, "x"); !errors.Is(err, discovery.ErrNotStarted) {
		t.Fatalf("FindByName before Start = %v", err)
	}
	s.Announce() // a no-op before Start
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("second Start = %v", err)
	}
	if s.DHT() == nil || s.DHT().Mode() != dht.ModeServer {
		t.Fatal("no DHT in server mode after Start")
	}
	protos := h.Mux().Protocols()
	if !slices.Contains(protos, "/nova/kad/1.0.0") || slices.Contains(protos, "/ipfs/kad/1.0.0") {
		t.Fatalf("the host speaks %v; want /nova/kad/1.0.0 and never the public DHT", protos)
	}
	// Alone, a publish has nobody to put to: an error, not a hang.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Publish(pctx); err == nil {
		t.Fatal("Publish without peers succeeded")
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Contains(h.Mux().Protocols(), "/nova/kad/1.0.0") {
		t.Fatal("the host still serves the DHT after Close")
	}
	if err := s.Start(ctx); !errors.Is(err, discovery.ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
	if _, err := s.Lookup(ctx, "x@"+h.ID().String()); err == nil {
		t.Fatal("Lookup of a missing local agent succeeded")
	}
	if _, err := s.FindByCapability(ctx, "x"); !errors.Is(err, discovery.ErrClosed) {
		t.Fatalf("FindByCapability after Close = %v", err)
	}
	// Closing before Start is fine too.
	s2, err := discovery.New(h, key, swarm, reg, reg, discovery.WithMDNS(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSmallSwarm(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 6, slow)
	waitRoutingTables(t, nodes, 3)
	publishAll(t, nodes)
	ctx := t.Context()
	for i, n := range nodes {
		for j := range nodes {
			if i == j {
				continue
			}
			cards, err := n.svc.FindByName(ctx, agentName(j))
			if err != nil {
				t.Fatalf("node %d: FindByName(%s): %v", i, agentName(j), err)
			}
			if len(cards) != 1 || cards[0].Host != nodes[j].h.ID().String() || cards[0].Origin != agentcard.OriginLocal {
				t.Fatalf("node %d: FindByName(%s) = %+v; want the card as signed", i, agentName(j), cards)
			}
			got, ok := n.reg.Get(cards[0].Address())
			if !ok || got.Origin != agentcard.OriginRemote {
				t.Fatalf("node %d: %s not merged into the registry as remote", i, cards[0].Address())
			}
		}
		cards, err := n.svc.FindByCapability(ctx, "echo")
		if err != nil || len(cards) != len(nodes)-1 {
			t.Fatalf("node %d: FindByCapability(echo) = %d cards, %v", i, len(cards), err)
		}
		if cards, err := n.svc.FindByCapability(ctx, fmt.Sprintf("only-%d", (i+1)%len(nodes))); err != nil || len(cards) != 1 {
			t.Fatalf("node %d: FindByCapability(only-%d) = %d cards, %v", i, (i+1)%len(nodes), len(cards), err)
		}
	}
	addr := agentName(1) + "@" + nodes[1].h.ID().String()
	if c, err := nodes[0].svc.Lookup(ctx, addr); err != nil || c.Address() != addr {
		t.Fatalf("Lookup(%s) = %v, %v", addr, c.Address(), err)
	}
	self := agentName(0) + "@" + nodes[0].h.ID().String()
	if c, err := nodes[0].svc.Lookup(ctx, self); err != nil || c.Origin != agentcard.OriginLocal {
		t.Fatalf("Lookup(own agent) = %+v, %v", c, err)
	}
	for _, bad := range []string{agentName(1), "bad name@x", agentName(1) + "@" + nodes[0].h.ID().String()} {
		if _, err := nodes[0].svc.Lookup(ctx, bad); !errors.Is(err, agentcard.ErrAgentNotFound) {
			t.Errorf("Lookup(%q) = %v, want AGENT_NOT_FOUND", bad, err)
		}
	}
	missing := agentName(9) + "@" + nodes[1].h.ID().String()
	if _, err := nodes[0].svc.Lookup(ctx, missing); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("Lookup(%s) = %v, want AGENT_NOT_FOUND", missing, err)
	}
	start := time.Now()
	if _, err := nodes[0].svc.FindByName(ctx, "nobody"); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("FindByName(nobody) = %v, want AGENT_NOT_FOUND", err)
	} else if !strings.Contains(err.Error(), swarm) {
		t.Errorf("the error does not say where it searched: %v", err)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("FindByName(nobody) gave up after %s, without its 4 retries from 100 ms", d)
	}
	if _, err := nodes[0].svc.FindByCapability(ctx, "nothing"); !errors.Is(err, agentcard.ErrCapabilityNotFound) {
		t.Fatalf("FindByCapability(nothing) = %v, want CAPABILITY_NOT_FOUND", err)
	}
	if _, err := nodes[0].svc.FindByName(ctx, "a@b"); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("FindByName(a@b) = %v", err)
	}
	// A second lookup within the cache TTL answers from the cache.
	before := nodes[0].svc.Stats().CacheHits
	if _, err := nodes[0].svc.FindByName(ctx, agentName(2)); err != nil {
		t.Fatal(err)
	}
	if nodes[0].svc.Stats().CacheHits <= before {
		t.Error("a repeated lookup did not use the cache")
	}
}

// TestLiveness runs the loops on their real timers (republish and refresh
// every second) and ages the cards with a shared clock (TTL 10 minutes)
// that the test advances, so how fast a loaded machine runs the loops
// cannot make a heartbeat look stale. An update announced with Announce
// reaches every registry through the refresh loop; a node that leaves
// stays listed until a TTL after its last heartbeat and is then gone from
// every registry; the live nodes, whose heartbeats keep coming, stay
// listed for longer than a TTL.
func TestLiveness(t *testing.T) {
	checkLeaks(t)
	clk := &clock{}
	tm := timing{ttl: 10 * time.Minute, republish: time.Second, refresh: time.Second, cache: 500 * time.Millisecond, clock: clk}
	// The DHT ages its stored records on real time (MaxRecordAge is the
	// TTL by default): a reader whose store and first responder still hold
	// a superseded record reads it until it ages out, so the test keeps
	// that age short on real time.
	nodes := network(t, 8, tm, discovery.WithDHTOptions(dht.MaxRecordAge(20*time.Second)))
	waitRoutingTables(t, nodes, 3)
	publishAll(t, nodes)
	// Every node reads every other node's card by its address (the
	// capability and name lookups are TestSmallSwarm's): from then on the
	// refresh loop re-reads those hosts.
	waitfor.Eventually(t, time.Minute, func() error {
		for i, n := range nodes {
			for j, m := range nodes {
				addr := agentName(j) + "@" + m.h.ID().String()
				if i == j {
					continue
				}
				if _, err := n.svc.Lookup(t.Context(), addr); err != nil {
					return fmt.Errorf("node %d: Lookup(%s): %w", i, addr, err)
				}
			}
		}
		return nil
	})
	found := clk.now()

	c, err := nodes[0].reg.Register(agentCard(agentName(0), "echo", "later"))
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].svc.Announce()
	waitfor.Eventually(t, time.Minute, func() error {
		for i, n := range nodes[1:] {
			if got, ok := n.reg.Get(c.Address()); !ok || got.Revision != c.Revision {
				return fmt.Errorf("node %d has %s at revision %d, want %d", i+1, c.Address(), got.Revision, c.Revision)
			}
		}
		return nil
	})

	gone := nodes[len(nodes)-1]
	goneAddr := agentName(len(nodes)-1) + "@" + gone.h.ID().String()
	for i, n := range nodes[:len(nodes)-1] {
		if _, ok := n.reg.Get(goneAddr); !ok {
			t.Fatalf("node %d does not list %s before it left", i, goneAddr)
		}
	}
	gone.close()
	left := clk.now()
	nodes = nodes[:len(nodes)-1]

	// heartbeatsSince waits until every registry holds every live node's
	// card with a heartbeat at or after since: the republish and refresh
	// loops have run since the clock moved.
	heartbeatsSince := func(since time.Time) {
		t.Helper()
		waitfor.Eventually(t, time.Minute, func() error {
			for i, n := range nodes {
				for j, m := range nodes {
					addr := agentName(j) + "@" + m.h.ID().String()
					if i == j {
						continue
					}
					got, ok := n.reg.Get(addr)
					if !ok {
						return fmt.Errorf("node %d does not list %s", i, addr)
					}
					if seen := time.UnixMilli(got.LastSeenAt); seen.Before(since) {
						return fmt.Errorf("node %d last heard of %s at %s, before %s", i, addr, seen.Format(time.StampMilli), since.Format(time.StampMilli))
					}
				}
			}
			return nil
		})
	}

	// Nine tenths of a TTL after it left, every registry still lists the
	// departed node: its last heartbeat is at most a few seconds older
	// than its departure.
	clk.advance(tm.ttl * 9 / 10)
	for i, n := range nodes {
		if _, ok := n.reg.Get(goneAddr); !ok {
			t.Fatalf("node %d dropped %s %s (clock) after it left, before its TTL", i, goneAddr, clk.now().Sub(left))
		}
	}
	heartbeatsSince(clk.now())

	// A fifth of a TTL later its last heartbeat is more than a TTL old:
	// every registry drops it, while the live nodes' heartbeats, at most a
	// fifth of a TTL old, keep them listed. The loops go on merging fresh
	// heartbeats of the live nodes and refusing the departed node's
	// lingering records.
	clk.advance(tm.ttl / 5)
	if d := clk.now().Sub(found); d <= tm.ttl {
		t.Fatalf("the clock moved %s since every node found every card, want more than the TTL %s", d, tm.ttl)
	}
	for i, n := range nodes {
		if got := len(n.reg.Remote()); got != len(nodes)-1 {
			t.Errorf("node %d holds %d remote cards more than a TTL after finding them, want %d", i, got, len(nodes)-1)
		}
	}
	for i, n := range nodes {
		if _, ok := n.reg.Get(goneAddr); ok {
			t.Errorf("node %d still lists %s %s (clock) after it left", i, goneAddr, clk.now().Sub(left))
		}
	}
	heartbeatsSince(clk.now())
}

// TestPublishRemembersProvidedKeys: a publish remembers the provider keys
// it provided, so that only a key new since Start is first provided with
// a bounded lookup; a key of a removed agent is forgotten.
func TestPublishRemembersProvidedKeys(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 3, slow, discovery.WithRosterInterval(0))
	waitRoutingTables(t, nodes, 1)
	publishAll(t, nodes)
	n := nodes[0]
	want := []string{
		discovery.CapabilityKey(swarm, "echo"), discovery.CapabilityKey(swarm, "only-0"), discovery.CapabilityKey(swarm, "skill-0"),
		discovery.MembersKey(swarm), discovery.NameKey(swarm, agentName(0)),
	}
	slices.Sort(want)
	if got := discovery.ProvidedKeys(n.svc); !slices.Equal(got, want) {
		t.Fatalf("provided keys after a publish = %v, want %v", got, want)
	}
	if _, err := n.reg.Register(agentCard(agentName(0), "echo")); err != nil {
		t.Fatal(err)
	}
	publishAll(t, nodes[:1])
	want = []string{discovery.CapabilityKey(swarm, "echo"), discovery.MembersKey(swarm), discovery.NameKey(swarm, agentName(0))}
	slices.Sort(want)
	if got := discovery.ProvidedKeys(n.svc); !slices.Equal(got, want) {
		t.Fatalf("provided keys after the agent dropped two capabilities = %v, want %v", got, want)
	}
}
