package discovery_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nova-node/nova-node/discovery"
)

// BenchmarkLookup measures card lookups in a 100-node loopback DHT with
// nova's default DHT settings and the lookup cache off, so every lookup
// asks the DHT: by name (the providers of the name key, then the card), by
// a capability one agent offers (providers, the agent index, then the
// card), and by a capability twenty agents offer. Each iteration picks a
// random querying node and a random target; p50 and p99 are reported in
// milliseconds. Run it alone:
//
//	go test -run '^$' -bench BenchmarkLookup ./discovery/
func BenchmarkLookup(b *testing.B) {
	tm := slow
	tm.cache = 0
	nodes := network(b, 100, tm, discovery.WithRetry(0, 0))
	waitRoutingTables(b, nodes, 10)
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
	run := func(b *testing.B, want int, f func(ctx context.Context, q, target int) (int, error)) {
		var lat []time.Duration
		for b.Loop() {
			q, target := pick()
			start := time.Now()
			n, err := f(context.Background(), q, target)
			lat = append(lat, time.Since(start))
			if err != nil || n < want {
				b.Fatalf("node %d, target %d: %d cards, %v", q, target, n, err)
			}
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
		b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	}
	b.Run("name", func(b *testing.B) {
		run(b, 1, func(ctx context.Context, q, target int) (int, error) {
			cards, err := nodes[q].svc.FindByName(ctx, agentName(target))
			return len(cards), err
		})
	})
	b.Run("capability", func(b *testing.B) {
		run(b, 1, func(ctx context.Context, q, target int) (int, error) {
			cards, err := nodes[q].svc.FindByCapability(ctx, fmt.Sprintf("only-%d", target))
			return len(cards), err
		})
	})
	b.Run("capability-20-agents", func(b *testing.B) {
		run(b, 19, func(ctx context.Context, q, target int) (int, error) {
			cards, err := nodes[q].svc.FindByCapability(ctx, fmt.Sprintf("skill-%d", target%5))
			return len(cards), err
		})
	})
	b.Run("address", func(b *testing.B) {
		run(b, 1, func(ctx context.Context, q, target int) (int, error) {
			_, err := nodes[q].svc.Lookup(ctx, agentName(target)+"@"+nodes[target].h.ID().String())
			return 1, err
		})
	})
}
