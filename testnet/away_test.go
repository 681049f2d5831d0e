package testnet_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// withTTL gives every node an outbox that waits ttl for a node that is away.
func withTTL(ttl time.Duration) testnet.Option {
	return testnet.WithConfig(func(_ int, c *node.Config) { c.DeliveryTTL = ttl })
}

// TestAwayNodeGetsItsEnvelopesWhenItReturns: the receiving node is down
// (stopped, then started again from its data dir) for longer than the
// channel's redials, while the sender posts 10,000 notifications. None
// fails; the channel parks ("away"), and once the node is back every
// envelope arrives exactly once, in order. A sender waiting for the
// acknowledgement of a notification meanwhile hears PEER_AWAY, and that
// notification arrives too.
func TestAwayNodeGetsItsEnvelopesWhenItReturns(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, withTTL(time.Hour))
	postN(t, net.Nodes[0], 0, 10)
	waitTakenAndAcked(t, net, rec, 10)
	cfg := net.ConfigOf(1)
	net.Kill(1)
	postN(t, net.Nodes[0], 10, 1000)
	waitfor.Eventually(t, 15*time.Second, func() error {
		for _, c := range net.Nodes[0].Router().Channels() {
			if c.State == "away" && c.Pending == 990 {
				return nil
			}
		}
		return fmt.Errorf("no parked channel with 990 envelopes: %+v", net.Nodes[0].Router().Channels())
	})
	if n := deliveryFailures(net.Nodes[0]); n != 0 {
		t.Fatalf("%d DELIVERY_FAILED while the node was away", n)
	}
	env, err := net.Nodes[0].NewEnvelope("a0", "sink", envelope.TypeNotification, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var away *protocol.PeerAwayError
	if _, err := net.Nodes[0].Router().Send(t.Context(), env); !errors.As(err, &away) || protocol.CodeOf(err) != protocol.CodePeerAway || away.Until.IsZero() {
		t.Fatalf("a waiting send to the away node: %v, want PEER_AWAY with its time to live", err)
	}
	postN(t, net.Nodes[0], 1001, 10000)
	net.Start(1, cfg, rec.register(t))
	net.Connect(0, 1) // the node is back: the sender dials at once
	waitfor.Eventually(t, 30*time.Second, func() error {
		if got := rec.len(); got < 10000 {
			return fmt.Errorf("%d of 10000 received after the node came back", got)
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 10000)
	if n := deliveryFailures(net.Nodes[0]); n != 0 {
		t.Fatalf("%d DELIVERY_FAILED", n)
	}
}

// TestAwayNodeThatNeverReturns: envelopes parked for a node that never
// comes back fail exactly once each with DELIVERY_FAILED when their time
// to live ends (not when the redials are spent); a request to it fails at
// once with DELIVERY_FAILED (its sender waits for an answer).
func TestAwayNodeThatNeverReturns(t *testing.T) {
	rec := &recorder{}
	const ttl = 3 * time.Second
	net := sinkPair(t, rec, withTTL(ttl))
	postN(t, net.Nodes[0], 0, 5)
	waitTakenAndAcked(t, net, rec, 5)
	net.Kill(1)
	start := time.Now()
	ids := postN(t, net.Nodes[0], 5, 25)
	failures := func() map[string]int {
		m := map[string]int{}
		for _, e := range net.Nodes[0].Observer().Recent(0) {
			if e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed && e.EnvelopeID != "" {
				m[e.EnvelopeID]++
			}
		}
		return m
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		if f := failures(); len(f) < len(ids) {
			return fmt.Errorf("%d of %d failures reported", len(f), len(ids))
		}
		return nil
	})
	if took := time.Since(start); took < ttl {
		t.Fatalf("envelopes failed after %s, before their time to live of %s", took, ttl)
	}
	f := failures()
	for _, id := range ids {
		if f[id] != 1 {
			t.Fatalf("envelope %s reported %d times", id, f[id])
		}
	}
	// The channel is closed once nothing waits on it; a request opens a
	// new one, which gives up after its redials.
	req, err := net.Nodes[0].NewEnvelope("a0", "sink", envelope.TypeRequest, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Nodes[0].Router().Send(t.Context(), req); protocol.CodeOf(err) != protocol.CodeDeliveryFailed {
		t.Fatalf("a request to a node that is away: %v, want DELIVERY_FAILED", err)
	}
}

// TestFullChannelIsQueueFull: a channel holding as many envelopes as it
// may (its peer away) refuses the next with QUEUE_FULL, which says "slow
// down", not DELIVERY_FAILED; nothing it held is lost.
func TestFullChannelIsQueueFull(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, withTTL(time.Hour))
	net.Kill(1)
	const limit = 10000 // protocol's per-channel bound
	postN(t, net.Nodes[0], 0, limit)
	env, err := net.Nodes[0].NewEnvelope("a0", "sink", envelope.TypeNotification, limit)
	if err != nil {
		t.Fatal(err)
	}
	_, err = net.Nodes[0].Router().Post(t.Context(), env)
	if protocol.CodeOf(err) != protocol.CodeQueueFull || !errors.Is(err, protocol.ErrQueueFull) {
		t.Fatalf("post beyond the channel's bound: %v, want QUEUE_FULL", err)
	}
	pending := 0
	for _, c := range net.Nodes[0].Router().Channels() {
		pending += c.Pending
	}
	if pending != limit {
		t.Fatalf("%d envelopes pending, want %d", pending, limit)
	}
}

// BenchmarkAwayReturn: 10,000 notifications wait in the outbox while their
// receiver's node is down; reported is the time from the node's return
// (started and connected) to the last of them delivered, and the rate.
func BenchmarkAwayReturn(b *testing.B) {
	const n = 10000
	var total time.Duration
	runs := 0
	for b.Loop() {
		b.StopTimer()
		rec := &recorder{}
		net := testnet.New(b, 2, withTTL(time.Hour), testnet.WithoutLeakCheck(b)) // several nets live until the end
		rec.register(b)(net.Nodes[1])
		net.Connect(0, 1)
		net.WaitForCards()
		cfg := net.ConfigOf(1)
		net.Kill(1)
		for i := 0; i < n; i++ {
			env, err := net.Nodes[0].NewEnvelope("a0", "sink", envelope.TypeNotification, i)
			if err == nil {
				_, err = net.Nodes[0].Router().Post(b.Context(), env)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		net.Start(1, cfg, rec.register(b))
		b.StartTimer()
		start := time.Now()
		net.Connect(0, 1)
		for rec.len() < n {
			time.Sleep(time.Millisecond)
		}
		total += time.Since(start)
		runs++
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(runs), "ms-return-to-last")
	b.ReportMetric(float64(n*runs)/total.Seconds(), "msgs/s")
}
