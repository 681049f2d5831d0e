package connhealth

import (
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The lifecycle of a service: Close is idempotent and safe before Start (and
// before Attach); Start needs a host, does nothing the second time, and
// refuses to run after Close.
func TestMonitorLifecycle(t *testing.T) {
	m := New()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}

	if err := New().Start(t.Context()); !errors.Is(err, errNotAttached) {
		t.Fatalf("Start before Attach: %v, want errNotAttached", err)
	}

	_, m = monitoredHost(t)
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close writes what the address book saw since its last flush before it
// returns, and the next Attach puts it back in a peerstore.
func TestMonitorCloseWritesTheBook(t *testing.T) {
	s := newMemStore()
	m := New(WithStore(s))
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	m.Attach(h)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p, a := testPeer(t), ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	m.book.mu.Lock()
	m.book.dirty[p] = []ma.Multiaddr{a}
	m.book.mu.Unlock()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.m[string(p)]; !ok {
		t.Fatal("Close returned before the book was written")
	}

	h2, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h2.Close() })
	New(WithStore(s)).Attach(h2)
	if got := h2.Peerstore().Addrs(p); len(got) != 1 || !got[0].Equal(a) {
		t.Fatalf("Attach loaded %v for the remembered peer, want [%s]", got, a)
	}
}

// A configured peer is dialled at Start.
func TestMonitorDialsConfiguredPeers(t *testing.T) {
	b, _ := monitoredHost(t)
	m := New(WithPeers(peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}))
	a, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Transport(m.TCPTransport))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	m.Attach(a)
	t.Cleanup(func() { m.Close() })
	sub, err := a.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-sub.Out():
			if c := e.(event.EvtPeerConnectednessChanged); c.Peer == b.ID() && c.Connectedness == network.Connected {
				return
			}
		case <-timeout:
			t.Fatal("the configured peer was not dialled")
		}
	}
}

// The configured peers' addresses are in the peerstore once the Monitor
// is attached, before its first dial: a send made at once finds them.
func TestMonitorKnowsConfiguredPeersAtAttach(t *testing.T) {
	b, _ := monitoredHost(t)
	m := New(WithPeers(peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}))
	a, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Transport(m.TCPTransport))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	m.Attach(a)
	t.Cleanup(func() { m.Close() })
	if got := a.Peerstore().Addrs(b.ID()); len(got) != len(b.Addrs()) {
		t.Fatalf("addresses of the configured peer before Start: %v, want %v", got, b.Addrs())
	}
}
