package discovery_test

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

var lookupNodes = flag.Int("nova.lookupnodes", 100, "nodes in BenchmarkLookup's DHT")

// BenchmarkLookup measures card lookups in a 100-node loopback DHT with
// nova's default DHT settings and the lookup cache off, so every lookup
// asks the DHT: by name, by a capability one agent offers, by a
// capability a fifth of the agents offer (twenty of 100), and by exact
// address. The capability lookups start with no card held
// (Service.ForgetCards before each), so every card crosses the wire;
// capability-20-agents-held repeats a lookup that has just been made, as
// a node that holds the cards already (from the roster, the refresh loop
// or an earlier lookup) makes it: the provider records and the indexes
// are read again, the cards the indexes list at the held revision are
// not. Its raw
// counterpart is kad-dht's own GetValue with Quorum(1) of the target's
// card record on the same DHT ("raw-getvalue"): every sub-benchmark also
// times that raw read, from the same querying node for the same target,
// alternating with its own lookup, and reports both p50s and their ratio
// (x-raw), so that a noisy machine moves both alike. The capability
// sub-benchmarks also time a name lookup of the target from the same node
// in the same way (name-p50-ms, x-name), since their goal is a multiple
// of a name lookup. Each iteration picks
// a random querying node and a random target; latencies are reported in
// milliseconds; -nova.lookupnodes sets the DHT's size. Run it alone:
//
//	go test -run '^$' -bench BenchmarkLookup -benchtime 200x ./discovery/
func BenchmarkLookup(b *testing.B) {
	tm := slow
	tm.cache = 0
	// The roster is off: it would read every member's index and cards
	// during set-up, and the lookups are what is measured.
	nodes := network(b, *lookupNodes, tm, discovery.WithRetry(0, 0), discovery.WithRosterInterval(0))
	meet(b, nodes, 10)
	publishAll(b, nodes)
	rng := mrand.New(mrand.NewPCG(1, 2))
	pick := func() (q, target int) {
		q = rng.IntN(len(nodes))
		target = rng.IntN(len(nodes) - 1)
		if target >= q {
			target++
		}
		return q, target
	}
	raw := func(ctx context.Context, q, target int) error {
		_, err := nodes[q].svc.DHT().GetValue(ctx, agentcard.Key(nodes[target].h.ID(), agentName(target)), dht.Quorum(1))
		return err
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p := func(lat []time.Duration, pc int) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)*pc/100]
	}
	byName := func(ctx context.Context, q, target int) error {
		_, err := nodes[q].svc.FindByName(ctx, agentName(target))
		return err
	}
	// run times f against raw and, when withName is set, against a name
	// lookup of the target from the same node; prep, when not nil, runs
	// untimed before each f.
	run := func(b *testing.B, want int, withName bool, prep func(q, target int), f func(ctx context.Context, q, target int) (int, error)) {
		var lat, rawLat, nameLat []time.Duration
		i := 0
		for b.Loop() {
			q, target := pick()
			timeRaw := func() {
				start := time.Now()
				if err := raw(context.Background(), q, target); err != nil {
					b.Fatalf("node %d, target %d: raw GetValue: %v", q, target, err)
				}
				rawLat = append(rawLat, time.Since(start))
				if !withName {
					return
				}
				start = time.Now()
				if err := byName(context.Background(), q, target); err != nil {
					b.Fatalf("node %d, target %d: name lookup: %v", q, target, err)
				}
				nameLat = append(nameLat, time.Since(start))
			}
			if i%2 == 1 {
				timeRaw()
			}
			if prep != nil {
				prep(q, target)
			}
			start := time.Now()
			n, err := f(context.Background(), q, target)
			lat = append(lat, time.Since(start))
			if err != nil || n < want {
				b.Fatalf("node %d, target %d: %d cards, %v", q, target, n, err)
			}
			if i%2 == 0 {
				timeRaw()
			}
			i++
		}
		p50, raw50 := p(lat, 50), p(rawLat, 50)
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p(lat, 99)), "p99-ms")
		b.ReportMetric(ms(raw50), "raw-p50-ms")
		b.ReportMetric(float64(p50)/float64(raw50), "x-raw")
		if withName {
			name50 := p(nameLat, 50)
			b.ReportMetric(ms(name50), "name-p50-ms")
			b.ReportMetric(float64(p50)/float64(name50), "x-name")
		}
	}
	b.Run("raw-getvalue", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			q, target := pick()
			start := time.Now()
			if err := raw(context.Background(), q, target); err != nil {
				b.Fatalf("node %d, target %d: %v", q, target, err)
			}
			lat = append(lat, time.Since(start))
		}
		b.ReportMetric(ms(p(lat, 50)), "p50-ms")
		b.ReportMetric(ms(p(lat, 99)), "p99-ms")
	})
	b.Run("name", func(b *testing.B) {
		run(b, 1, false, nil, func(ctx context.Context, q, target int) (int, error) {
			cards, err := nodes[q].svc.FindByName(ctx, agentName(target))
			return len(cards), err
		})
	})
	forget := func(q, _ int) { nodes[q].svc.ForgetCards() }
	only := func(ctx context.Context, q, target int) (int, error) {
		cards, err := nodes[q].svc.FindByCapability(ctx, fmt.Sprintf("only-%d", target))
		return len(cards), err
	}
	skill := func(ctx context.Context, q, target int) (int, error) {
		cards, err := nodes[q].svc.FindByCapability(ctx, fmt.Sprintf("skill-%d", target%5))
		return len(cards), err
	}
	b.Run("capability", func(b *testing.B) { run(b, 1, true, forget, only) })
	b.Run("capability-20-agents", func(b *testing.B) { run(b, len(nodes)/5-1, true, forget, skill) })
	b.Run("capability-20-agents-held", func(b *testing.B) {
		run(b, len(nodes)/5-1, true, func(q, target int) {
			if _, err := skill(context.Background(), q, target); err != nil {
				b.Fatalf("node %d, target %d: %v", q, target, err)
			}
		}, skill)
	})
	b.Run("address", func(b *testing.B) {
		run(b, 1, false, nil, func(ctx context.Context, q, target int) (int, error) {
			_, err := nodes[q].svc.Lookup(ctx, agentName(target)+"@"+nodes[target].h.ID().String())
			return 1, err
		})
	})
}

// meet waits until every node's routing table holds at least least peers,
// connecting a node that has fewer to three random others every few
// seconds: on a busy machine a node's bootstrap dials can all time out,
// and kad-dht tries its bootstrap peers again only every two minutes.
func meet(b *testing.B, nodes []*testNode, least int) {
	b.Helper()
	rng := mrand.New(mrand.NewPCG(3, 4))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		short := 0
		for _, n := range nodes {
			if n.svc.DHT().RoutingTable().Size() >= least {
				continue
			}
			short++
			for range 3 {
				o := nodes[rng.IntN(len(nodes))]
				if o != n {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_ = n.h.Connect(ctx, o.info())
					cancel()
				}
			}
		}
		if short == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d nodes have fewer than %d peers in their routing tables after 2 minutes", short, least)
		}
		time.Sleep(2 * time.Second) // polling a condition, not synchronising
	}
}
