package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The router's ack check reads a real connection's socket: a connection
// between two nodes that just talked was acknowledged moments ago and has
// nothing in flight.
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
	conn := a.Host().Network().ConnsToPeer(b.Host().ID())[0]
	deadline := time.Now().Add(5 * time.Second)
	for {
		silent, inFlight, ok := a.paths.acks(conn)
		if !ok {
			t.Fatal("the ack check does not find the connection's socket")
		}
		if !inFlight && silent < 5*time.Second {
			t.Logf("last acknowledgement %s ago", silent)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("silent %s, in flight %v on a live loopback connection", silent, inFlight)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
