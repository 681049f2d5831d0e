package connhealth

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// monitoredHost is a host on 127.0.0.1 over TCP alone, built and attached
// as the node does (doc.go), and its Monitor; both closed when the test
// ends.
func monitoredHost(t *testing.T) (host.Host, *Monitor) {
	t.Helper()
	m := New()
	h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Transport(m.TCPTransport))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	m.Attach(h)
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.Network().Listen(ma.StringCast("/ip4/127.0.0.1/tcp/0")); err != nil {
		t.Fatal(err)
	}
	return h, m
}

// The router's ack check reads a real connection's socket, on both sides
// (dialled and accepted): between two hosts that just talked, nothing is
// in flight or retransmitted once the connection rests, and the socket has
// an RTO and the time of the peer's last acknowledgement. (That a dead
// peer's sockets read otherwise is TestMovedLaptopIsReachedAgain's, between
// network namespaces.)
func TestAckCheckReadsTheSocket(t *testing.T) {
	type end struct {
		h host.Host
		m *Monitor
	}
	start := func() end { h, m := monitoredHost(t); return end{h, m} }
	a, b := start(), start()
	if err := a.h.Connect(t.Context(), peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name string
		n, p end
	}{{"dialled", a, b}, {"accepted", b, a}} {
		conns := side.n.h.Network().ConnsToPeer(side.p.h.ID())
		if len(conns) == 0 {
			t.Fatalf("%s: no connection", side.name)
		}
		side.n.m.paths.mu.Lock()
		w := side.n.m.paths.socks[keyOf(conns[0].LocalMultiaddr(), conns[0].RemoteMultiaddr())]
		side.n.m.paths.mu.Unlock()
		if w == nil || w.swarm.Load() == nil || *w.swarm.Load() != conns[0] {
			t.Fatalf("%s: the socket is not tied to the swarm's connection (Connected)", side.name)
		}
		// A frame may be in flight at any moment (identify, the DHT):
		// look until the connection rests.
		waitfor.Eventually(t, 5*time.Second, func() error {
			st, ok := side.n.m.AckCheck(conns[0])
			if !ok {
				return fmt.Errorf("%s: the ack check does not find the connection's socket", side.name)
			}
			if st.InFlight || st.Retransmitting || st.RTO <= 0 || st.Silent >= time.Minute {
				return fmt.Errorf("%s: %+v on an idle loopback connection, want nothing in flight or retransmitted and an RTO", side.name, st)
			}
			t.Logf("%s: %+v", side.name, st)
			return nil
		})
	}
}
