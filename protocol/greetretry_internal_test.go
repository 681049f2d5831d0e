package protocol

import (
	"crypto/rand"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A greeting the peer resets (its limits were full for a moment) is tried
// again while the peer stays connected, so the peer gets this node's cards
// without waiting for the hello refresh. (A greeting whose stream cannot
// even be opened is retried the same way, by greetLocked.)
func TestResetGreetingIsRetried(t *testing.T) {
	tg := rvNewTarget(t)
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h := loopbackHost(t, libp2p.Identity(key))
	var tries, kept atomic.Int32
	h.SetStreamHandler(IDA2A, func(st network.Stream) {
		if tries.Add(1) == 1 {
			_ = st.Reset()
			return
		}
		kept.Add(1)
		_, _ = io.Copy(io.Discard, st)
	})
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: tg.h.ID(), Addrs: tg.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if !rvWait(t, 10*time.Second, func() bool { return kept.Load() > 0 }) {
		t.Fatalf("after a failed greeting (%d streams tried), the node never greeted the peer again", tries.Load())
	}
}
