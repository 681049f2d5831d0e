package gossiphealth

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// fakeHost is connected to the peers in up, with no streams.
type fakeHost struct {
	host.Host
	up map[peer.ID]bool
}

func (h fakeHost) Network() network.Network { return fakeNet{up: h.up} }

type fakeNet struct {
	network.Network
	up map[peer.ID]bool
}

func (n fakeNet) Connectedness(p peer.ID) network.Connectedness {
	if n.up[p] {
		return network.Connected
	}
	return network.NotConnected
}

func (fakeNet) ConnsToPeer(peer.ID) []network.Conn { return nil }

// waited is how long k holds a stream to p, on the bubble's clock.
func waited(t *testing.T, k *Keeper, p peer.ID) time.Duration {
	t.Helper()
	start := time.Now()
	if err := k.wait(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// A stream to a peer whose outbound stream closed while it stayed
// connected is held for the settle time from the close; streams to other
// peers, and to a peer that was gone, are not.
func TestNewStreamHeldAfterCloseWhileConnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a, b, gone = peer.ID("a"), peer.ID("b"), peer.ID("gone")
		k := newKeeper(fakeHost{up: map[peer.ID]bool{a: true, b: true}}, time.Second)
		defer k.Close()
		k.outboundClosed(a)
		k.outboundClosed(gone)
		time.Sleep(300 * time.Millisecond)
		if d := waited(t, k, a); d != 700*time.Millisecond {
			t.Fatalf("held %s, want the rest of the settle time (700ms)", d)
		}
		if d := waited(t, k, a); d != 0 {
			t.Fatalf("a second stream held %s", d)
		}
		for _, p := range []peer.ID{b, gone} {
			if d := waited(t, k, p); d != 0 {
				t.Fatalf("%s held %s", p, d)
			}
		}
	})
}

// Close releases a held stream at once; a cancelled caller gets its
// context's error.
func TestHoldEndsWithCloseOrContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a = peer.ID("a")
		k := newKeeper(fakeHost{up: map[peer.ID]bool{a: true}}, time.Minute)
		k.outboundClosed(a)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := k.wait(ctx, a); err != context.Canceled {
			t.Fatalf("cancelled wait: %v", err)
		}
		go func() {
			time.Sleep(time.Second)
			k.Close()
			k.Close()
		}()
		if d := waited(t, k, a); d != time.Second {
			t.Fatalf("held %s after Close, want 1s (when Close came)", d)
		}
		k.outboundClosed(a) // after Close: no hold, no goroutine
		if d := waited(t, k, a); d != 0 {
			t.Fatalf("held %s after Close", d)
		}
	})
}

// Entries of peers that never opened a new stream leave once their hold
// is over.
func TestExpiredHoldsAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := map[peer.ID]bool{"a": true, "b": true}
		k := newKeeper(fakeHost{up: up}, time.Second)
		defer k.Close()
		k.outboundClosed("a")
		time.Sleep(2 * time.Second)
		k.outboundClosed("b")
		synctest.Wait()
		k.mu.Lock()
		defer k.mu.Unlock()
		if _, ok := k.hold["a"]; ok || len(k.hold) != 1 {
			t.Fatalf("holds %v, want b's only", k.hold)
		}
	})
}
