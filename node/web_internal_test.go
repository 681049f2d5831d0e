package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
)

// A page that stops reading must not stall the host: libp2p's event bus
// blocks its emitter while a subscriber's buffer is full, so the web
// view's subscription drains it into one slot.
func TestWebSubscriptionNeverBlocksTheEventBus(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	cfg.MetricsListen = "off"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	_, changes, stop := webSource{n}.Subscribe()
	em, err := n.host.EventBus().Emitter(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	done := make(chan error, 1)
	go func() { // owned by the test, which waits on done
		for range 1000 {
			if err := em.Emit(event.EvtPeerConnectednessChanged{Peer: n.id, Connectedness: network.Connected}); err != nil {
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
	case <-time.After(10 * time.Second):
		t.Fatal("1,000 connectedness events to an unread web view subscription blocked the event bus")
	}
	if len(changes) != 1 {
		t.Errorf("%d changes pending, want 1 (they coalesce)", len(changes))
	}
	stop()
}
