package protocol

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
)

// scriptReceiver makes Mallory a scripted receiver of A2A streams: each
// frame the target sends is decoded and handed to on, with the stream's
// number (1, 2, ...) and reply, which writes a frame back (safe from any
// goroutine). on returns false to reset the stream. The stream count is
// returned.
func scriptReceiver(m *rvMallory, on func(n int32, msg *inMsg, reply func(*wireMsg)) bool) *atomic.Int32 {
	var streams atomic.Int32
	m.h.SetStreamHandler(IDA2A, func(st network.Stream) {
		n := streams.Add(1)
		fr := frame.NewReader(st, 0)
		bw := bufio.NewWriter(st)
		var wmu sync.Mutex
		reply := func(msg *wireMsg) {
			b, _ := encodeMsg(msg)
			wmu.Lock()
			defer wmu.Unlock()
			_ = frame.Write(bw, b)
			_ = bw.Flush()
		}
		for {
			b, err := fr.Next()
			if err != nil {
				return
			}
			msg, err := decodeMsg(b)
			if err != nil {
				continue
			}
			if !on(n, msg, reply) {
				_ = st.Reset()
				return
			}
		}
	})
	return &streams
}

// A receiver that accepts a channel and then stops reading blocks the
// sender posting to it (that is the backpressure), but nothing else: the
// channel's state is readable (status) and the persister writes its
// unacknowledged envelopes while the sender waits. Before, the blocked
// write held the channel's lock, and both waited for the 30 s write
// deadline, keeping the envelopes in memory only.
func TestStalledReceiverBlocksOnlyItsSender(t *testing.T) {
	store := NewMemStore()
	tg := rvNewTarget(t, WithStore(store))
	m := rvNewMallory(t, tg)
	stop := make(chan struct{})
	scriptReceiver(m, func(_ int32, msg *inMsg, reply func(*wireMsg)) bool {
		if msg.Kind != kindOpen {
			return true
		}
		reply(&wireMsg{Kind: kindOpened, Ch: msg.Ch})
		<-stop // and never read again
		return false
	})
	t.Cleanup(func() { close(stop) }) // runs before the hosts close
	m.stream(tg, "m").drain()         // the target learns agent m from this hello
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}

	f := envelope.NewFactory()
	payload := []byte(`"` + strings.Repeat("x", 254) + `"`)
	var posted atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // blocked in Post once the stream's windows are full; Close ends it
		for ctx.Err() == nil {
			env, err := f.New("a0", to, envelope.TypeNotification, payload)
			if err != nil {
				return
			}
			if _, err := tg.r.Post(ctx, env); err != nil {
				return
			}
			posted.Add(1)
		}
	}()
	// Wait until Post blocks: no progress for 300 ms (a blocked call has
	// no event of its own, only a quiet spell).
	last := int64(-1)
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatalf("the sender never blocked (%d posted)", posted.Load())
		}
		time.Sleep(300 * time.Millisecond)
		if n := posted.Load(); n == last && n > 0 {
			break
		} else {
			last = n
		}
	}

	got := make(chan []ChannelInfo, 1)
	go func() { got <- tg.r.Channels() }()
	select {
	case cs := <-got:
		if len(cs) != 1 || cs[0].Pending < int(last) {
			t.Fatalf("channels %+v, want one with >= %d pending", cs, last)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Channels() waits for the blocked sender")
	}
	if !rvWait(t, 5*time.Second, func() bool {
		chs, _ := store.LoadOutbox()
		return len(chs) == 1 && len(chs[0].Items) >= int(last)
	}) {
		chs, _ := store.LoadOutbox()
		n := 0
		for _, c := range chs {
			n += len(c.Items)
		}
		t.Fatalf("%d of %d posted envelopes written to the outbox while the sender is blocked", n, last)
	}
}

// A receiver still connected but slow to answer a redial's open (its
// reader behind other channels' retransmissions on a slow link) is waited
// for: only reaching a peer that is not connected is bounded short. With
// the whole redial bounded to max(1 s, delay), the envelope failed with
// DELIVERY_FAILED though the peer never went away. (From a review.)
func TestSlowOpenAnswerIsWaitedFor(t *testing.T) {
	const openDelay = 4 * time.Second // past the three 1 s redials of the old bound, replies included
	tg := rvNewTarget(t, WithRetry(3, 100*time.Millisecond))
	m := rvNewMallory(t, tg)
	var opens atomic.Int32
	streams := scriptReceiver(m, func(n int32, msg *inMsg, reply func(*wireMsg)) bool {
		switch msg.Kind {
		case kindOpen:
			opens.Add(1)
			ok := &wireMsg{Kind: kindOpened, Ch: msg.Ch}
			if n == 1 {
				reply(ok)
				return true
			}
			time.AfterFunc(openDelay, func() { reply(ok) }) // slow, but alive and answering every open
		case kindEnvelope:
			if n == 1 {
				return false // the first stream is lost before the ack
			}
			reply(&wireMsg{Kind: kindAck, Ch: msg.Ch, Seq: msg.Seq})
		}
		return true
	})
	m.stream(tg, "m").drain()
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}
	env, err := envelope.NewFactory().New("a0", to, envelope.TypeNotification, []byte(`"hi"`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = tg.r.Send(t.Context(), env)
	if err != nil {
		t.Fatalf("envelope failed after %s though the receiver answered every open: %v (streams %d, opens %d)",
			time.Since(start).Round(time.Millisecond), err, streams.Load(), opens.Load())
	}
	if streams.Load() < 2 {
		t.Fatalf("%d streams: the first was not lost, nothing was redialled", streams.Load())
	}
}

// silentReceiver makes Mallory a receiver that accepts channels and then
// acknowledges nothing for ackAfter (never, if 0). With deaf, its pings
// go unanswered too: a peer dead behind a connection nobody closed. It
// counts the streams opened to it.
func silentReceiver(t *testing.T, m *rvMallory, ackAfter time.Duration, deaf bool) *atomic.Int32 {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the hosts close
	if deaf {
		// Dead from here on: pings unanswered, and no new connection
		// accepted (the listener goes), while the old one stays open.
		m.h.SetStreamHandler(ping.ID, func(st network.Stream) {
			if sw, ok := m.h.Network().(*swarm.Swarm); ok {
				sw.ListenClose(sw.ListenAddresses()...)
			}
			<-stop
			_ = st.Reset()
		})
	}
	return scriptReceiver(m, func(_ int32, msg *inMsg, reply func(*wireMsg)) bool {
		switch msg.Kind {
		case kindOpen:
			reply(&wireMsg{Kind: kindOpened, Ch: msg.Ch})
		case kindEnvelope:
			if ackAfter > 0 {
				time.AfterFunc(ackAfter, func() { reply(&wireMsg{Kind: kindAck, Ch: msg.Ch, Seq: msg.Seq}) })
			}
		}
		return true
	})
}

// quicPair is rvNewTarget and rvNewMallory on QUIC only.
func quicPair(t *testing.T, opts ...Option) (*rvTarget, *rvMallory) {
	t.Helper()
	quic := func(opts ...libp2p.Option) host.Host {
		h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/udp/0/quic-v1")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	h := quic()
	r, reg := startRouter(t, h, []string{"a0"}, opts...)
	tg := &rvTarget{h: h, r: r, reg: reg}
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	mh := quic(libp2p.Identity(key))
	if err := mh.Connect(t.Context(), peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return tg, &rvMallory{t: t, h: mh, key: key}
}

// A peer that stops answering without closing its QUIC connection
// (killed, asleep, off the network) is probed with a ping once the sender
// has waited probeAfter for an ack; unanswered, the connection is closed,
// so the channel redials and fails with DELIVERY_FAILED in seconds, not
// after QUIC's 30 s idle timeout.
func TestSilentPeerIsProbedAndDropped(t *testing.T) {
	tg, m := quicPair(t, WithLiveness(300*time.Millisecond, 300*time.Millisecond), WithRetry(1, 50*time.Millisecond))
	silentReceiver(t, m, 0, true)
	m.stream(tg, "m").drain()
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}
	env, _ := envelope.NewFactory().New("a0", to, envelope.TypeNotification, []byte(`"anyone?"`))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := tg.r.Send(ctx, env); !errors.Is(err, ErrDeliveryFailed) {
		t.Fatalf("send to a silent peer: %v after %s, want DELIVERY_FAILED", err, time.Since(start).Round(time.Millisecond))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("DELIVERY_FAILED after %s: the silence was not noticed", d)
	}
}

// A slow peer, one that answers pings but acknowledges late (its agent
// takes its time), is probed and left alone: the envelope is delivered.
func TestSlowPeerAnsweringPingsIsKept(t *testing.T) {
	tg, m := quicPair(t, WithLiveness(200*time.Millisecond, 300*time.Millisecond), WithRetry(1, 50*time.Millisecond))
	// The liveness loop looks every second (livenessTick): the first look
	// sees the write, the second probes. Acks come 4 s late, so the probe
	// has come and been answered by then, on a loaded machine too.
	streams := silentReceiver(t, m, 4*time.Second, false)
	var pings atomic.Int32
	ps := &ping.PingService{Host: m.h}
	m.h.SetStreamHandler(ping.ID, func(st network.Stream) { pings.Add(1); ps.PingHandler(st) })
	m.stream(tg, "m").drain()
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}
	env, _ := envelope.NewFactory().New("a0", to, envelope.TypeNotification, []byte(`"take your time"`))
	if _, err := tg.r.Send(t.Context(), env); err != nil {
		t.Fatalf("send to a slow peer: %v", err)
	}
	if pings.Load() == 0 {
		t.Fatal("the slow peer was never probed: the test did not exercise the check")
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("%d streams to the slow peer: its connection was dropped though it answered", n)
	}
}

// Over TCP nothing is probed: a killed peer's kernel resets the
// connection, and a ping would queue behind what the stream has buffered,
// so a healthy peer taking a large envelope over a slow uplink was taken
// for dead (a review reproduced it at 32 KB/s). A deaf TCP peer keeps its
// connection.
func TestNoProbeOverTCP(t *testing.T) {
	tg := rvNewTarget(t, WithLiveness(100*time.Millisecond, 100*time.Millisecond))
	m := rvNewMallory(t, tg)
	streams := silentReceiver(t, m, 0, true)
	var pings atomic.Int32
	m.h.SetStreamHandler(ping.ID, func(st network.Stream) { pings.Add(1); _ = st.Reset() })
	m.stream(tg, "m").drain()
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}
	env, _ := envelope.NewFactory().New("a0", to, envelope.TypeNotification, []byte(`"hi"`))
	if _, err := tg.r.Post(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two liveness ticks past probeAfter
	if n := pings.Load(); n != 0 {
		t.Fatalf("%d pings over TCP", n)
	}
	if n := streams.Load(); n != 1 || len(tg.h.Network().ConnsToPeer(m.h.ID())) == 0 {
		t.Fatalf("%d streams, %d connections: the TCP peer was dropped", n, len(tg.h.Network().ConnsToPeer(m.h.ID())))
	}
}

// A peer that comes back from another IP address (it moved: a new DHCP
// lease, another network): the connection to its old address is probed at
// once, whether a channel waits on it or not. Over TCP the verdict is the
// kernel's (AckCheck, here a fake): a path whose kernel left the ping's
// bytes unacknowledged past a retransmission is closed, and the channel
// goes on over the new connection; one that acknowledges (a peer with two
// paths), has nothing in flight, or is only slow (its retransmission timer
// has not fired) is kept, however late the ping's answer.
func TestPeerBackFromAnotherAddressIsFollowed(t *testing.T) {
	gone := AckState{Silent: time.Hour, InFlight: true, Retransmitting: true, RTO: 200 * time.Millisecond}
	t.Run("old path silent", func(t *testing.T) {
		mp := movedPeer(t, gone, true)
		select {
		case err := <-mp.sent:
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			t.Logf("delivered %s after it was sent", time.Since(mp.start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatal("the envelope still waits on the old connection 10 s later")
		}
		if c := connFrom(mp.tg, mp.m, net.IPv4(127, 0, 0, 1)); c != nil {
			t.Errorf("the connection from the old address is still open")
		}
	})
	t.Run("idle stream, old path silent", func(t *testing.T) {
		mp := movedPeer(t, gone, false)
		if !rvWait(t, 5*time.Second, func() bool { return connFrom(mp.tg, mp.m, net.IPv4(127, 0, 0, 1)) == nil }) {
			t.Fatal("the idle connection from the old address was not probed and closed")
		}
	})
	for _, keep := range []struct {
		name string
		st   AckState
	}{
		{"old path acknowledging", AckState{Silent: 0, InFlight: true, RTO: 200 * time.Millisecond}},
		{"nothing in flight", AckState{Silent: time.Hour, Retransmitting: true, RTO: 200 * time.Millisecond}},
		{"slow link, timer not fired", AckState{Silent: 10 * time.Second, InFlight: true, RTO: 3 * time.Second}},
	} {
		t.Run(keep.name, func(t *testing.T) {
			mp := movedPeer(t, keep.st, true)
			if !rvWait(t, 5*time.Second, func() bool { return mp.checks.Load() > 0 }) {
				t.Fatal("the old connection was not probed")
			}
			time.Sleep(100 * time.Millisecond) // an observation window: the connection stays
			if c := connFrom(mp.tg, mp.m, net.IPv4(127, 0, 0, 1)); c == nil {
				t.Fatal("the connection was closed, want it kept")
			}
		})
	}
}

// The verdict on a TCP connection's acknowledgements.
func TestAckStateDead(t *testing.T) {
	const probe = 2 * time.Second
	for _, tc := range []struct {
		st   AckState
		want bool
	}{
		{AckState{Silent: 3 * time.Second, InFlight: true, Retransmitting: true, RTO: 200 * time.Millisecond}, true},
		{AckState{Silent: time.Second, InFlight: true, Retransmitting: true, RTO: 200 * time.Millisecond}, false},     // not silent for the whole probe
		{AckState{Silent: 3 * time.Second, InFlight: true, Retransmitting: true, RTO: 1600 * time.Millisecond}, true}, // the RTO backed off: still dead
		{AckState{Silent: 3 * time.Second, InFlight: true, RTO: 200 * time.Millisecond}, false},                       // the timer has not fired
		{AckState{Silent: 3 * time.Second, Retransmitting: true, RTO: 200 * time.Millisecond}, false},                 // nothing in flight
	} {
		if got := tc.st.dead(probe); got != tc.want {
			t.Errorf("%+v: dead = %v, want %v", tc.st, got, tc.want)
		}
	}
}

// movedAway is movedPeer's setup.
type movedAway struct {
	tg     *rvTarget
	m      *rvMallory
	sent   chan error // the notification's outcome, if one was sent
	start  time.Time
	checks *atomic.Int32 // AckCheck calls
}

// movedPeer sets up a target router whose AckCheck reports st for
// connections from 127.0.0.1, and a peer, Mallory, connected from there
// that stops answering; with send, the target sends it a notification.
// Then Mallory, from 127.0.0.2 (a host with its key), connects again, and
// acknowledges there.
func movedPeer(t *testing.T, st AckState, send bool) movedAway {
	mp := movedAway{checks: new(atomic.Int32), sent: make(chan error, 1)}
	acks := func(c network.Conn) (AckState, bool) {
		if ip, err := manet.ToIP(c.RemoteMultiaddr()); err == nil && ip.Equal(net.IPv4(127, 0, 0, 1)) {
			mp.checks.Add(1)
			return st, true
		}
		return AckState{}, true
	}
	mp.tg = rvNewTarget(t, WithLiveness(time.Minute, 300*time.Millisecond), WithRetry(3, 50*time.Millisecond), WithAckCheck(acks))
	mp.m = rvNewMallory(t, mp.tg)
	silentReceiver(t, mp.m, 0, true) // the old address: nothing answers any more
	mp.m.stream(mp.tg, "m").drain()
	to := mp.m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := mp.tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}
	if !rvWait(t, 5*time.Second, func() bool { return mp.tg.r.outStreamTo(mp.m.h.ID()) }) {
		t.Fatal("the target opened no stream to Mallory")
	}
	mp.start = time.Now()
	if send {
		env, _ := envelope.NewFactory().New("a0", to, envelope.TypeNotification, []byte(`"still there?"`))
		go func() {
			_, err := mp.tg.r.Send(t.Context(), env)
			mp.sent <- err
		}()
		time.Sleep(200 * time.Millisecond) // the scenario: the envelope waits on the old connection before the move
	}
	moved, err := libp2p.New(libp2p.Identity(mp.m.key), libp2p.ListenAddrStrings("/ip4/127.0.0.2/tcp/0"))
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	t.Cleanup(func() { moved.Close() })
	silentReceiver(t, &rvMallory{t: t, h: moved, key: mp.m.key}, time.Millisecond, false) // acknowledges
	if err := moved.Connect(t.Context(), peer.AddrInfo{ID: mp.tg.h.ID(), Addrs: mp.tg.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	from := moved.Network().ConnsToPeer(mp.tg.h.ID())[0].LocalMultiaddr()
	if ip, _ := manet.ToIP(from); !ip.Equal(net.IPv4(127, 0, 0, 2)) {
		t.Skipf("the second host dialled from %s, not 127.0.0.2", from)
	}
	return mp
}

// connFrom is an open connection of the target to Mallory from ip.
func connFrom(tg *rvTarget, m *rvMallory, ip net.IP) network.Conn {
	for _, c := range tg.h.Network().ConnsToPeer(m.h.ID()) {
		if cip, err := manet.ToIP(c.RemoteMultiaddr()); err == nil && cip.Equal(ip) && !c.IsClosed() {
			return c
		}
	}
	return nil
}

// outStreamTo reports whether r has a live outbound stream to p.
func (r *Router) outStreamTo(p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.out[p]
	return s != nil && !s.dead()
}
