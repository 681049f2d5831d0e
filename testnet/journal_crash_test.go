package testnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// TestSenderKilledRightAfterPosting: a sender node process posts 5,000
// notifications to a node that is down (its channel cannot open, so the
// envelopes wait; the outbox store is written behind, every 20 ms) and is
// killed with SIGKILL the moment its last Post returned. Both started
// again, every one of them arrives: each exactly once, in order. What Post
// accepted was in the journal before it returned.
func TestSenderKilledRightAfterPosting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	rec, net, cfg, recvAddr, dir, sender := crashSenderAndSink(t, 10)
	net.Kill(0)
	sender.do(t, "post 10 5000")
	sender.kill()

	sender = startCrashChild(t, dir, sender.addr.String(), crashSender+"=1")
	net.Start(0, cfg, rec.register(t))
	sender.do(t, "connect %s %s", net.Nodes[0].ID(), recvAddr())
	waitfor.Eventually(t, 30*time.Second, func() error {
		if got := rec.len(); got < 5000 {
			return fmt.Errorf("%d of 5000 received after both restarts", got)
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 5000)
}
