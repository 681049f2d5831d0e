package discovery_test

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	lpnet "github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// fakeIPs is a machine's address list that a test changes.
type fakeIPs struct {
	mu  sync.Mutex
	ips []net.IP
}

func (f *fakeIPs) set(ips ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ips = nil
	for _, s := range ips {
		f.ips = append(f.ips, net.ParseIP(s))
	}
}

func (f *fakeIPs) get() ([]net.IP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]net.IP(nil), f.ips...), nil
}

// A node whose IP address goes away (the machine moved) closes the
// connections made from it, which are dead, and dials their peers again;
// an address that only appears leaves the connections alone.
func TestMoveClosesConnectionsFromAGoneAddressAndRedials(t *testing.T) {
	checkLeaks(t)
	tm := timing{ttl: time.Minute, republish: 20 * time.Second, refresh: 20 * time.Second, cache: time.Second}
	b := newNode(t, nil, tm, nil)
	ips := &fakeIPs{}
	ips.set("127.0.0.1", "192.0.2.10")
	a := newNode(t, nil, tm, nil, discovery.WithInterfaceAddrs(ips.get))
	if err := a.h.Connect(t.Context(), b.info()); err != nil {
		t.Fatal(err)
	}
	conns := a.h.Network().ConnsToPeer(b.h.ID())
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	old := conns[0]

	ips.set("127.0.0.1", "192.0.2.10", "192.0.2.11") // a second network joins
	waitfor.Eventually(t, 10*time.Second, func() error {
		if a.svc.Stats().Moves != 1 {
			return errors.New("the new address was not noticed")
		}
		return nil
	})
	if old.IsClosed() {
		t.Fatal("a connection was closed although no address went away")
	}

	ips.set("192.0.2.10", "192.0.2.11") // 127.0.0.1 "goes away"
	waitfor.Eventually(t, 10*time.Second, func() error {
		if !old.IsClosed() {
			return errors.New("the connection from the gone address is still open")
		}
		if a.h.Network().Connectedness(b.h.ID()) != lpnet.Connected {
			return errors.New("the peer was not dialled again")
		}
		return nil
	})
	if got := a.svc.Stats().Moves; got != 2 {
		t.Fatalf("Moves = %d, want 2", got)
	}
}
