package crdt

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/streamscope/scopetest"
)

// scopedManager is a started Manager on a loopback host that uses rm.
func scopedManager(t *testing.T, rm network.ResourceManager) (host.Host, *Manager) {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.ResourceManager(rm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(h, ps, "test", nopStore{}, WithCatchupInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return h, m
}

// Inbound catch-up streams are attached to ServiceName with their buffer
// reserved while open, and a peer's streams past the service's per-peer
// limit are reset.
func TestCatchupStreamsCountAgainstService(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 2)
	hb, _ := scopedManager(t, rm)
	ha, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ha.Close() })
	if err := ha.Connect(t.Context(), peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	open := func() network.Stream {
		t.Helper()
		s, err := ha.NewStream(t.Context(), hb.ID(), ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte{5}); err != nil { // a request begun, never ended
			t.Fatal(err)
		}
		return s
	}
	scopetest.FillPeerLimit(t, rm, ServiceName, 2, catchupBuffer, open)
}

// The catch-up stream a document opens is attached to ServiceName while
// the peer answers, and released after.
func TestCatchupOutboundCountsAgainstService(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 8)
	ha, ma := scopedManager(t, rm)
	if _, err := ma.Open(t.Context(), "doc"); err != nil { // before any peer: no catch-up yet
		t.Fatal(err)
	}
	hb, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	// While hb holds a request, the asker's stream is open: what the
	// service holds then is the stream's.
	during := make(chan network.ScopeStat, 1)
	hb.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Close()
		if _, err := readCatchupRequest(s); err != nil {
			s.Reset()
			return
		}
		select {
		case during <- scopetest.Stat(t, rm, ServiceName):
		default:
		}
		b, _ := encMode.Marshal(catchupFrame{End: true})
		_ = frame.Write(s, b)
	})
	// Connecting makes ma catch up with hb (followPeers).
	if err := hb.Connect(t.Context(), peer.AddrInfo{ID: ha.ID(), Addrs: ha.Addrs()}); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-during:
		if st.NumStreamsOutbound < 1 || st.Memory < catchupBuffer {
			t.Fatalf("while the peer answers: %+v, want an outbound stream and at least %d bytes", st, catchupBuffer)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no catch-up request in 10 s")
	}
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsOutbound == 0 && st.Memory == 0 })
}
