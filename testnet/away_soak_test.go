//go:build soak

package testnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// TestAwayFor8And60Seconds: the receiving node is down for 8 s, then for
// 60 s, while the sender posts 10,000 notifications spread over each
// absence. None fails; once the node is back, all of them arrive exactly
// once, in order. (Soak: about 80 s.)
func TestAwayFor8And60Seconds(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, withTTL(time.Hour))
	total := 0
	for _, away := range []time.Duration{8 * time.Second, 60 * time.Second} {
		cfg := net.ConfigOf(1)
		net.Kill(1)
		const n = 10000
		tick := time.NewTicker(away / n * 100) // 100 posts per tick
		for i := 0; i < n; i += 100 {
			<-tick.C // the absence itself, spread over its length
			for j := i; j < i+100; j++ {
				env, err := net.Nodes[0].NewEnvelope("a0", "sink", envelope.TypeNotification, total+j)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := net.Nodes[0].Router().Post(t.Context(), env); err != nil {
					t.Fatalf("post %d while the node is away: %v", total+j, err)
				}
			}
		}
		tick.Stop()
		total += n
		net.Start(1, cfg, rec.register(t))
		net.Connect(0, 1)
		waitfor.Eventually(t, 60*time.Second, func() error {
			if got := rec.len(); got < total {
				return fmt.Errorf("%d of %d received after a %s absence", got, total, away)
			}
			return nil
		})
		rec.exactlyOnceInOrder(t, total)
		if f := deliveryFailures(net.Nodes[0]); f != 0 {
			t.Fatalf("%d DELIVERY_FAILED", f)
		}
	}
}
