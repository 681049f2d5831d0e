package protocol

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	msmux "github.com/multiformats/go-multistream"

	"github.com/nova-node/nova-node/internal/clock"
)

// A peer that dies without closing its connections (killed, its machine
// asleep or off the network) is noticed over QUIC only when the
// connection's idle timeout (30 s) runs out: UDP brings no reset. Until
// then its channels stay open, envelopes sent to it wait unacknowledged,
// and DELIVERY_FAILED came 37.5 s after a kill -9 in a user's test.
//
// So the Router watches its outbound streams on QUIC connections: one that
// has written since it last read anything, stayed silent for probeAfter
// since, and has something to hear back (an envelope unacknowledged, an
// open unanswered), is probed with a ping on the stream's own connection
// (QUIC streams are independent: the ping does not queue behind a large
// envelope). A ping that gets no answer within probeTimeout closes that
// connection: the channels see the loss at once and redial. A peer that
// answers (a slow agent: acks come when envelopes are handled) is left
// alone, and probed again after another probeAfter of silence. A ping
// refused proves the peer alive too.
//
// Not over TCP (and WebSocket): a killed peer's kernel resets the
// connection at once, and a ping there queues behind everything the
// stream has buffered, so on a slow uplink a healthy peer receiving a large
// envelope would be taken for dead by its pong (a review reproduced it at
// 32 KB/s). A TCP peer cut off the network is found by the node's TCP user
// timeout (10 s). The one TCP probe, probeIfMoved's, is judged by the
// peer's kernel (WithAckCheck), not by the pong.

// livenessTick is how often the streams are looked at, while any of them
// runs over QUIC; with none, the loop sleeps until one is opened (an idle
// node on TCP alone wakes for nothing).
const livenessTick = time.Second

// watch is what livenessLoop last saw of one stream.
type watch struct {
	writes, reads uint64
	waiting       time.Time // when a write was first seen with no read after it; zero if none
}

func (r *Router) livenessLoop() {
	t := time.NewTicker(livenessTick)
	defer t.Stop()
	// seen and live swap every tick, and streams is reused: a node with
	// many peers looks at them every second, and allocating the three
	// afresh each time was garbage in proportion to its peers. They keep
	// the room the most peers so far needed (a few bytes per peer).
	seen, live := map[*outStream]*watch{}, map[*outStream]*watch{}
	var streams []*outStream
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		r.mu.Lock()
		streams = streams[:0]
		for _, s := range r.out {
			streams = append(streams, s)
		}
		r.mu.Unlock()
		for _, s := range streams {
			if !onQUIC(s.st.Conn()) {
				continue
			}
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
				r.spawn(func() { r.probe(s, r.o.probeTimeout) })
			}
		}
		seen, live = live, seen
		clear(live)
		clear(streams) // drop the references until the next look
		if len(seen) == 0 && !r.sleepUntilQUIC(t) {
			return
		}
	}
}

// sleepUntilQUIC stops t until an outbound stream on QUIC is added (or one
// was since the last look: the signal waits), then restarts it; false when
// the router closes first.
func (r *Router) sleepUntilQUIC(t *time.Ticker) bool {
	t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-r.quicOut:
	}
	t.Reset(livenessTick)
	return true
}

// probe pings s's peer on s's connection and closes that connection if
// the peer does not answer. Over TCP the ping may wait behind what the
// connection has buffered (a large envelope on a slow uplink), so there
// the verdict is the kernel's: the connection is closed only if, at the
// end of the probe, bytes wait for an acknowledgement, the retransmission
// timer has fired, and the peer's kernel has acknowledged nothing for the
// whole probe (r.o.acks, AckState.dead).
func (r *Router) probe(s *outStream, timeout time.Duration) {
	defer s.probing.Store(false)
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	conn := s.st.Conn()
	err := pingConn(ctx, conn)
	if err == nil || r.ctx.Err() != nil || s.dead() || !timedOut(ctx, err) {
		return // a pong, a refusal or a reset: either way the peer is there
	}
	why := "no answer to a ping within " + timeout.String()
	if !onQUIC(conn) {
		if r.o.acks == nil {
			return
		}
		st, ok := r.o.acks(conn)
		if !ok {
			r.log.Debugw("probe: no acknowledgement state for a TCP connection: kept", "peer", s.p, "addr", conn.RemoteMultiaddr())
			return
		}
		if !st.dead(timeout) {
			return // its kernel acknowledges, or has not been asked long enough: the ping is only slow
		}
		why = "nothing acknowledged for " + st.Silent.Round(time.Millisecond).String()
	}
	r.log.Infow("peer does not answer: closing its connection", "peer", s.p, "addr", conn.RemoteMultiaddr(), "why", why)
	r.o.sink.Emit(Event{Type: EvtChannelChanged, Time: clock.Now(), Peer: s.p, Success: false, SourceTier: -1, TargetTier: -1,
		Detail: "peer silent: " + why + "; its connection is closed"})
	_ = conn.Close()
	if n := CloseSiblings(r.h.Network(), conn); n > 0 {
		r.log.Infow("closed the silent peer's other connections on that path", "peer", s.p, "closed", n)
	}
}

// movedProbeTimeout bounds probeIfMoved's probe of a TCP connection, whose
// verdict is its kernel's: on a LAN (RTO about 200 ms) the ping's bytes are
// retransmitted several times within it.
const movedProbeTimeout = 2 * time.Second

// probeIfMoved probes s's connection when s's peer has just identified on
// fresh, a connection from another IP address: the peer has most likely
// moved (a new DHCP lease, another network), and s's connection, from its
// old address, is dead, which nothing would say before a timeout (the TCP
// user timeout, once something is sent). A peer that merely has two paths
// (Wi-Fi and Ethernet, IPv4 and IPv6) answers, or acknowledges, and keeps
// both. An idle s is probed too: its next send would otherwise wait out
// that timeout.
func (r *Router) probeIfMoved(s *outStream, fresh network.Conn) {
	old := s.st.Conn()
	if s.dead() || old == fresh {
		return
	}
	_, was, ok1 := pathOf(old)
	_, now, ok2 := pathOf(fresh)
	if !ok1 || !ok2 || was.Equal(now) {
		return
	}
	timeout := r.o.probeTimeout // QUIC: the pong's verdict, as in livenessLoop
	if !onQUIC(old) {
		timeout = min(timeout, movedProbeTimeout)
	}
	if s.probing.CompareAndSwap(false, true) {
		r.spawn(func() { r.probe(s, timeout) })
	}
}

// onQUIC reports whether c runs over QUIC.
func onQUIC(c network.Conn) bool {
	return strings.HasPrefix(c.ConnState().Transport, "quic")
}

// pingConn runs one libp2p ping (/ipfs/ping/1.0.0: 32 random bytes echoed)
// on a new stream of c, not on whichever connection the host would pick.
func pingConn(ctx context.Context, c network.Conn) error {
	st, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer st.Reset()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	if err := st.SetProtocol(ping.ID); err != nil {
		return err
	}
	if err := msmux.SelectProtoOrFail(ping.ID, st); err != nil {
		return err
	}
	out, in := make([]byte, ping.PingSize), make([]byte, ping.PingSize)
	if _, err := rand.Read(out); err != nil {
		return err
	}
	if _, err := st.Write(out); err != nil {
		return err
	}
	if _, err := io.ReadFull(st, in); err != nil {
		return err
	}
	if !bytes.Equal(in, out) {
		return errors.New("ping: wrong echo")
	}
	return nil
}

// timedOut reports whether err is the ping running out of time, rather
// than an answer of some kind.
func timedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
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

// CloseSiblings closes the other connections of dead's peer between the
// same two IP addresses as dead, and returns how many it closed. A QUIC
// connection on a wildcard listener (the default config) reports the
// wildcard as its local address, so in practice QUIC connections match
// only each other, and TCP connections only each other. It is for a connection found dead (a ping unanswered, a TCP user
// timeout): a host that answered nothing on one connection is gone for the
// others on that path too, and a channel that redialled onto one of them
// would wait out its timeout again. Two nodes that found each other at the
// same moment (mDNS) hold two connections; over QUIC both have the same
// addresses, so dead is told apart by identity. The same peer on another
// path (another local interface, another address of its own, a relayed
// connection) keeps its connections.
func CloseSiblings(nw network.Network, dead network.Conn) int {
	local, remote, ok := pathOf(dead)
	if !ok {
		return 0
	}
	closed := 0
	for _, c := range nw.ConnsToPeer(dead.RemotePeer()) {
		if c == dead {
			continue
		}
		if l, r, ok := pathOf(c); ok && l.Equal(local) && r.Equal(remote) {
			_ = c.Close()
			closed++
		}
	}
	return closed
}

// pathOf is the pair of IP addresses c runs between; not ok for a relayed
// connection, whose remote address is the relay's.
func pathOf(c network.Conn) (local, remote net.IP, ok bool) {
	if _, err := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT); err == nil {
		return nil, nil, false
	}
	local, err1 := manet.ToIP(c.LocalMultiaddr())
	remote, err2 := manet.ToIP(c.RemoteMultiaddr())
	return local, remote, err1 == nil && err2 == nil
}
