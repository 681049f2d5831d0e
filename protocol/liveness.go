package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/nova-node/nova-node/internal/clock"
)

// A peer that dies without closing its connections (killed, its machine
// asleep or off the network) is noticed by the transport only when its
// keepalives time out: about 30 s for QUIC and for yamux on TCP. Until
// then its channels stay open, envelopes sent to it wait unacknowledged,
// and DELIVERY_FAILED comes after that plus the redials (37 s in a test
// with kill -9 over QUIC).
//
// So the Router watches its outbound streams: one that has written since
// it last read anything, stayed silent for probeAfter since, and has
// something to hear back (an envelope unacknowledged, an open unanswered),
// is probed with a libp2p ping on the same connection. A ping that gets no
// answer within probeTimeout closes the peer's connections: the channels
// see the loss at once and redial. A peer that answers (a slow agent: acks
// come when envelopes are handled) is left alone, and probed again after
// another probeAfter of silence. A ping refused (a peer without the ping
// protocol) proves the peer alive too.

// livenessTick is how often the streams are looked at.
const livenessTick = time.Second

// watch is what livenessLoop last saw of one stream.
type watch struct {
	writes, reads uint64
	waiting       time.Time // when a write was first seen with no read after it; zero if none
}

func (r *Router) livenessLoop() {
	t := time.NewTicker(livenessTick)
	defer t.Stop()
	seen := map[*outStream]*watch{}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		r.mu.Lock()
		streams := make([]*outStream, 0, len(r.out))
		for _, s := range r.out {
			streams = append(streams, s)
		}
		r.mu.Unlock()
		live := make(map[*outStream]*watch, len(streams))
		for _, s := range streams {
			w := seen[s]
			if w == nil {
				w = &watch{}
			}
			live[s] = w
			writes, reads := s.writes.Load(), s.reads.Load()
			switch {
			case reads != w.reads && writes != w.writes:
				w.waiting = now // heard from it, but wrote since, perhaps after
			case reads != w.reads:
				w.waiting = time.Time{}
			case writes != w.writes && w.waiting.IsZero():
				w.waiting = now
			}
			w.writes, w.reads = writes, reads
			if w.waiting.IsZero() || now.Sub(w.waiting) < r.o.probeAfter {
				continue
			}
			if !s.awaiting() {
				w.waiting = time.Time{} // what it wrote asks for no answer (a hello)
				continue
			}
			w.waiting = now // the next probe, if still silent, after another probeAfter
			if s.probing.CompareAndSwap(false, true) {
				r.spawn(func() { r.probe(s) })
			}
		}
		seen = live
	}
}

// probe pings s's peer and closes its connections if it does not answer.
func (r *Router) probe(s *outStream) {
	defer s.probing.Store(false)
	ctx, cancel := context.WithTimeout(r.ctx, r.o.probeTimeout)
	defer cancel()
	res, answered := <-ping.Ping(ctx, r.h, s.p) // closed without a result when ctx ends
	if r.ctx.Err() != nil || s.dead() {
		return
	}
	if answered && (res.Error == nil || !errors.Is(res.Error, context.DeadlineExceeded) && ctx.Err() == nil) {
		return // a pong, or a refusal: either way the peer is there
	}
	r.log.Infow("peer does not answer: closing its connections", "peer", s.p, "silent", r.o.probeAfter+r.o.probeTimeout)
	r.o.sink.Emit(Event{Type: EventChannel, Time: clock.Now(), Peer: s.p, Success: false, SourceTier: -1, TargetTier: -1,
		Detail: "peer silent: no answer to a ping within " + r.o.probeTimeout.String() + "; its connections are closed"})
	_ = r.h.Network().ClosePeer(s.p)
}

// awaiting reports whether s's peer owes this node an answer: a channel
// bound to s with envelopes unacknowledged, or an open not yet answered.
func (s *outStream) awaiting() bool {
	s.mu.Lock()
	opening := len(s.opening) > 0
	bound := make([]*outChannel, 0, len(s.bound))
	for c := range s.bound {
		bound = append(bound, c)
	}
	s.mu.Unlock()
	if opening {
		return true
	}
	for _, c := range bound {
		c.mu.Lock()
		n := len(c.m.Pending())
		c.unlock()
		if n > 0 {
			return true
		}
	}
	return false
}
