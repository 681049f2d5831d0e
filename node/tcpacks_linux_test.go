package node

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// The router's ack check reads a real connection's socket, on both sides
// (dialled and accepted): between two nodes that just talked, nothing is
// in flight or retransmitted once the connection rests, and the socket has
// an RTO and the time of the peer's last acknowledgement. (That a dead
// peer's sockets read otherwise is TestMovedLaptopIsReachedAgain's, between
// network namespaces.)
func TestAckCheckReadsTheSocket(t *testing.T) {
	start := func() *Node {
		c := DefaultConfig()
		c.DataDir = t.TempDir()
		c.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
		c.APISocket = filepath.Join(t.TempDir(), "api.sock")
		c.MDNS = false
		c.MetricsListen = "off"
		n, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if err := n.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := start(), start()
	if err := a.Host().Connect(t.Context(), peer.AddrInfo{ID: b.Host().ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name string
		n    *Node
		p    *Node
	}{{"dialled", a, b}, {"accepted", b, a}} {
		conns := side.n.Host().Network().ConnsToPeer(side.p.Host().ID())
		if len(conns) == 0 {
			t.Fatalf("%s: no connection", side.name)
		}
		side.n.paths.mu.Lock()
		w := side.n.paths.socks[keyOf(conns[0].LocalMultiaddr(), conns[0].RemoteMultiaddr())]
		side.n.paths.mu.Unlock()
		if w == nil || w.swarm.Load() == nil || *w.swarm.Load() != conns[0] {
			t.Fatalf("%s: the socket is not tied to the swarm's connection (Connected)", side.name)
		}
		// A frame may be in flight at any moment (identify, the DHT):
		// look until the connection rests.
		waitfor.Eventually(t, 5*time.Second, func() error {
			st, ok := side.n.paths.acks(conns[0])
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
