package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// TestSenderBlockedOnTheStreamStillTakesAcks: a sender that outpaces its
// receiver blocks in Post while its channel's frames wait for the peer to
// read, and the peer may be waiting, in turn, for this node to read its
// acks. libp2p's mock network has no stream buffer, so the wait is at
// once: if the reader of acks waited for the blocked sender's channel,
// neither node would move again.
func TestSenderBlockedOnTheStreamStillTakesAcks(t *testing.T) {
	protocol.WithoutLockOrderChecks(t) // 60,000 envelopes
	routers, f := mockPair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const n = 60000
	done := make(chan error, 1)
	go func() {
		for range n {
			env, err := f.New("a0", "a1", envelope.TypeNotification, payload256)
			if err == nil {
				_, err = routers[0].Post(ctx, env)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the sender is stuck: acks are not taken while it waits on the stream")
	}
	deadline, _ := ctx.Deadline()
	waitfor.Eventually(t, time.Until(deadline), func() error {
		if p := pending(routers[0]); p > 0 {
			return fmt.Errorf("%d envelopes never acknowledged", p)
		}
		return nil
	})
}
