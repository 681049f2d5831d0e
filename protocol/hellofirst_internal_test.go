package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// The hello is the first frame of every outbound stream, even when many
// callers race for a new stream and write on it at once: the peer
// attributes every later frame from the cards in the hello.
func TestHelloIsFirstFrame(t *testing.T) {
	ha, hb := loopbackHost(t), loopbackHost(t)

	var mu sync.Mutex
	var first []uint8 // kind of the first frame of each stream b accepted
	hb.SetStreamHandler(IDA2A, func(st network.Stream) {
		fr := frame.NewReader(st, 0)
		body, err := fr.Next()
		if err == nil {
			if m, err := decodeMsg(body); err == nil {
				mu.Lock()
				first = append(first, m.Kind)
				mu.Unlock()
			}
		}
		_ = st.Reset()
	})

	reg := agentcard.NewRegistry(ha.ID())
	if _, err := reg.Register(agentcard.Card{ID: "a0", Name: "a0", Version: "1.0.0", Tier: 3, Capabilities: []agentcard.Capability{{ID: "echo", Name: "echo"}}}); err != nil {
		t.Fatal(err)
	}
	r, err := New(ha, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := ha.Connect(t.Context(), peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	marker, _ := encodeMsg(&wireMsg{Kind: kindOpen, Ch: "c", From: "x@y", To: "z"})
	const rounds, callers = 20, 16
	for round := range rounds {
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				if s, err := r.stream(context.Background(), hb.ID()); err == nil {
					_ = s.write([][]byte{marker}, true)
				}
			})
		}
		wg.Wait()
		r.mu.Lock()
		s := r.out[hb.ID()]
		r.mu.Unlock()
		// Let b read the stream's first frame before it is reset: a reset
		// that overtakes the handler's read would prove nothing.
		_ = waitfor.Within(2*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(first) <= round {
				return errors.New("b has not read the stream's first frame")
			}
			return nil
		})
		if s != nil {
			s.fail(ErrChannelClosed) // the next round opens a new stream
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(first) == 0 {
		t.Fatal("no stream reached the peer")
	}
	for i, k := range first {
		if k != kindHello {
			t.Fatalf("stream %d began with frame kind %d, not hello (%d)", i, k, kindHello)
		}
	}
}
