//go:build soak

package testnet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// TestKilledPeerNoticedInSeconds: a receiver killed with SIGKILL over QUIC
// leaves a connection nobody closes; QUIC itself notices after its 30 s
// idle timeout. The sender's liveness check (a ping after 5 s waiting for
// an ack, 5 s to answer it) closes the connection instead, so the envelope
// sent to the dead peer fails with DELIVERY_FAILED well before that.
func TestKilledPeerNoticedInSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	net := testnet.New(t, 1, testnet.WithTransport(testnet.QUIC))
	sender := net.Nodes[0]
	dir := t.TempDir()
	sink := startCrashSink(t, dir, "/ip4/127.0.0.1/udp/0/quic-v1")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := sender.Host().Connect(ctx, peer.AddrInfo{ID: sink.id, Addrs: []multiaddr.Multiaddr{sink.addr}}); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if _, ok := sender.Registry().Get("sink@" + sink.id.String()); !ok {
			return fmt.Errorf("the sender does not know the sink's card yet")
		}
		return nil
	})
	post := func(v int) string {
		env, err := sender.NewEnvelope("a0", "sink", envelope.TypeNotification, v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sender.Router().Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		return env.ID
	}
	post(0)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if len(seenLines(t, dir)) < 1 {
			return fmt.Errorf("not delivered yet")
		}
		return nil
	})
	sink.kill()
	start := time.Now()
	id := post(1)
	waitfor.Eventually(t, 25*time.Second, func() error {
		for _, e := range sender.Observer().Recent(0) {
			if e.Type == protocol.EvtErrorRaised && e.EnvelopeID == id && e.Code == protocol.CodeDeliveryFailed {
				return nil
			}
		}
		return fmt.Errorf("no DELIVERY_FAILED after %s", time.Since(start).Round(time.Second))
	})
	t.Logf("DELIVERY_FAILED %s after the kill", time.Since(start).Round(100*time.Millisecond))
}
