package testnet_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// Closing a channel (the seed's A2AChannel.close) fails each envelope
// still waiting on it with CHANNEL_CLOSED, once, and never with
// DELIVERY_FAILED; its outbox entry goes, so a restart does not bring it
// back; a closed or unknown channel cannot be closed again
// (CHANNEL_NOT_FOUND); and the next envelope between the same agents goes
// out on a new channel.
func TestClosingAChannelFailsWhatWaitsOnIt(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithConfig(func(i int, c *node.Config) {
		c.Retries = 12 // the channel would keep redialling for minutes
	}))
	postN(t, net.Nodes[0], 0, 5)
	waitTakenAndAcked(t, net, rec, 5)
	net.Partition([]int{0}, []int{1})
	ids := postN(t, net.Nodes[0], 5, 25)
	var ch protocol.ChannelInfo
	waitfor.Eventually(t, 5*time.Second, func() error {
		chs := net.Nodes[0].Router().Channels()
		if len(chs) != 1 || chs[0].Pending != len(ids) || chs[0].Stored != len(ids) {
			return fmt.Errorf("channels %+v, want one with %d envelopes pending, all in the outbox", chs, len(ids))
		}
		ch = chs[0]
		return nil
	})

	closed, err := net.Nodes[0].CloseChannel(ch.ID)
	if err != nil || closed.ID != ch.ID || closed.Pending != len(ids) {
		t.Fatalf("CloseChannel = %+v, %v; want the channel with %d pending", closed, err, len(ids))
	}
	failures := func(code string) map[string]int {
		m := map[string]int{}
		for _, e := range net.Nodes[0].Observer().Recent(0) {
			if e.Type == protocol.EvtErrorRaised && e.Code == code && e.EnvelopeID != "" {
				m[e.EnvelopeID]++
			}
		}
		return m
	}
	f := failures(protocol.CodeChannelClosed)
	for _, id := range ids {
		if f[id] != 1 {
			t.Errorf("envelope %s: %d CHANNEL_CLOSED errors, want 1", id, f[id])
		}
	}
	if len(f) != len(ids) {
		t.Errorf("%d CHANNEL_CLOSED errors for %d waiting envelopes", len(f), len(ids))
	}
	for _, c := range net.Nodes[0].Router().Channels() {
		if c.ID == ch.ID && (c.State != "closed" || c.Pending != 0) {
			t.Errorf("after close: %+v", c)
		}
	}
	for _, id := range []string{ch.ID, "no-such-channel"} {
		var nc *protocol.NoChannelError
		if _, err := net.Nodes[0].CloseChannel(id); !errors.As(err, &nc) || protocol.CodeOf(err) != protocol.CodeChannelNotFound {
			t.Errorf("CloseChannel(%q) = %v, want CHANNEL_NOT_FOUND", id, err)
		}
	}

	// The outbox entry went with it: a restart does not restore it.
	net.Restart(0, nil)
	for _, c := range net.Nodes[0].Router().Channels() {
		if c.ID == ch.ID {
			t.Fatalf("the closed channel came back after a restart: %+v", c)
		}
	}
	if f := failures(protocol.CodeDeliveryFailed); len(f) != 0 {
		t.Errorf("DELIVERY_FAILED for %d envelopes of a closed channel", len(f))
	}

	net.Heal([]int{0}, []int{1})
	postN(t, net.Nodes[0], 5, 6)
	waitfor.Eventually(t, 5*time.Second, func() error {
		if rec.len() < 6 {
			return fmt.Errorf("%d of 6 received", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 6) // 0..4, then the new channel's 5: none of the closed ones
	for _, c := range net.Nodes[0].Router().Channels() {
		if c.ID == ch.ID {
			t.Errorf("the closed channel carried the new envelope: %+v", c)
		}
	}
}
