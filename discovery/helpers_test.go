package discovery_test

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/tiers"
)

var verbose = flag.Bool("nova.verbose", false, "log discovery's debug output")

const swarm = "test-swarm"

// newHost starts a libp2p host listening on 127.0.0.1 only, TCP only.
func newHost(tb testing.TB) (host.Host, crypto.PrivKey) { return discovery.NewTestHost(tb) }

type testNode struct {
	h   host.Host
	key crypto.PrivKey
	reg *agentcard.Registry
	svc *discovery.Service
}

func (n *testNode) info() peer.AddrInfo { return peer.AddrInfo{ID: n.h.ID(), Addrs: n.h.Addrs()} }

// close stops the node (service, then host); safe to call twice.
func (n *testNode) close() {
	_ = n.svc.Close()
	_ = n.h.Close()
}

// timing is a test network's TTL, republish and refresh intervals, and
// its clock (nil: time.Now).
type timing struct {
	ttl, republish, refresh, cache time.Duration
	clock                          *clock
}

// clock is real time plus an offset that tests advance, shared by the
// registries and the services of a test network. Timers still run on real
// time.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

var slow = timing{ttl: 10 * time.Minute, republish: 3 * time.Minute, refresh: 3 * time.Minute, cache: 30 * time.Second}

// newNode starts a node with the given bootstrap peers and cards; the
// test's cleanup closes it. mDNS is off: tests never leave loopback.
func newNode(tb testing.TB, bootstrap []peer.AddrInfo, tm timing, cards []agentcard.Card, opts ...discovery.Option) *testNode {
	tb.Helper()
	h, key := newHost(tb)
	ropts := []agentcard.Option{agentcard.WithRemoteTTL(tm.ttl)}
	if tm.clock != nil {
		ropts = append(ropts, agentcard.WithClock(tm.clock.now))
		opts = append([]discovery.Option{discovery.WithClock(tm.clock.now)}, opts...)
	}
	reg := agentcard.NewRegistry(h.ID(), ropts...)
	for _, c := range cards {
		if _, err := reg.Register(c); err != nil {
			tb.Fatal(err)
		}
	}
	all := []discovery.Option{
		discovery.WithMDNS(false),
		discovery.WithBootstrapPeers(bootstrap),
		discovery.WithTTL(tm.ttl),
		discovery.WithRepublishInterval(tm.republish),
		discovery.WithRefreshInterval(tm.refresh),
		discovery.WithLookupCacheTTL(tm.cache),
		discovery.WithRetry(4, 100*time.Millisecond),
	}
	if !*verbose {
		all = append(all, discovery.WithLogger(nopLogger()))
	}
	svc, err := discovery.New(h, key, swarm, reg, reg, append(all, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	n := &testNode{h: h, key: key, reg: reg, svc: svc}
	tb.Cleanup(n.close)
	if err := svc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return n
}

// network starts n nodes; node i hosts agent "agent-i" with capabilities
// "echo", "skill-<i%5>" and "only-<i>" and bootstraps from up to three random earlier
// nodes (not a full mesh).
func network(tb testing.TB, n int, tm timing, opts ...discovery.Option) []*testNode {
	tb.Helper()
	nodes := make([]*testNode, 0, n)
	rng := mrand.New(mrand.NewPCG(uint64(n), 7))
	for i := range n {
		var boot []peer.AddrInfo
		for _, j := range rng.Perm(i)[:min(i, 3)] {
			boot = append(boot, nodes[j].info())
		}
		nodes = append(nodes, newNode(tb, boot, tm, []agentcard.Card{agentCard(agentName(i), "echo", fmt.Sprintf("skill-%d", i%5), fmt.Sprintf("only-%d", i))}, opts...))
	}
	return nodes
}

func agentName(i int) string { return fmt.Sprintf("agent-%d", i) }

func agentCard(id string, caps ...string) agentcard.Card {
	c := agentcard.Card{
		ID: id, Name: id, Version: "1.0.0", Description: "test agent " + id, Tier: tiers.L2,
		Protocols: []string{"a2a/1.0"}, Endpoints: []agentcard.Endpoint{{Transport: "libp2p", Address: "/nova/a2a/1.0.0"}},
		Capabilities: []agentcard.Capability{},
	}
	for _, cp := range caps {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp, Name: cp})
	}
	return c
}

// publishAll publishes every node's cards at once and fails on error.
// Each publish gets two minutes: 20 nodes publishing together under the
// race detector took more than 30 s on two cores shared with other jobs.
func publishAll(tb testing.TB, nodes []*testNode) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errs[i] = n.svc.Publish(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("node %d: publish: %v", i, err)
		}
	}
}

// refreshAll refreshes every node at once.
func refreshAll(tb testing.TB, nodes []*testNode) {
	tb.Helper()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if err := n.svc.Refresh(context.Background()); err != nil {
				tb.Error(err)
			}
		})
	}
	wg.Wait()
}

// waitRoutingTables waits until every node's DHT routing table holds at
// least min peers.
func waitRoutingTables(tb testing.TB, nodes []*testNode, least int) {
	tb.Helper()
	waitfor.Eventually(tb, 30*time.Second, func() error {
		for i, n := range nodes {
			if s := n.svc.DHT().RoutingTable().Size(); s < least {
				return fmt.Errorf("node %d has %d peers in its routing table, want %d", i, s, least)
			}
		}
		return nil
	})
}

// checkLeaks fails tb if a goroutine running discovery's code outlives
// the test's nodes. Register it with t.Cleanup before creating nodes, so
// that it runs after they are closed.
func checkLeaks(tb testing.TB) {
	tb.Helper()
	tb.Cleanup(func() {
		if last := leakcheck.Wait("github.com/nova-node/nova-node/discovery", 5*time.Second); last != "" {
			tb.Errorf("goroutines of discovery outlived Close:\n%s", last)
		}
	})
}

func nopLogger() *zap.SugaredLogger { return zap.NewNop().Sugar() }
