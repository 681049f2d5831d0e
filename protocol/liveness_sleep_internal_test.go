package protocol

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// With no outbound stream on QUIC the liveness loop does not tick: after its
// first look it waits for a QUIC stream to be opened, and a router that
// closes meanwhile ends it.
func TestLivenessLoopSleepsWithoutQUIC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := &Router{ctx: ctx, out: map[peer.ID]*outStream{}, quicOut: make(chan struct{}, 1)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.livenessLoop()
		}()
		time.Sleep(2 * livenessTick) // the first look finds no stream on QUIC
		synctest.Wait()
		r.quicOut <- struct{}{} // a QUIC stream opened: the loop takes the signal
		synctest.Wait()
		if len(r.quicOut) != 0 {
			t.Fatal("the liveness loop did not wait for a QUIC stream")
		}
		time.Sleep(2 * livenessTick) // it looked again, found none, and sleeps
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the liveness loop ended while the router runs")
		default:
		}
		cancel()
		<-done
	})
}
