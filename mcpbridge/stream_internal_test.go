package mcpbridge

import (
	"bufio"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/streamscope/scopetest"
)

func loopbackHost(t *testing.T, opts ...libp2p.Option) host.Host {
	t.Helper()
	h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func startBridge(t *testing.T, h host.Host, idle time.Duration) *Bridge {
	t.Helper()
	b, err := New(Config{Host: h, Registry: NewRegistry(), Policy: &Policy{Cards: agentcard.NewRegistry(h.ID())}, StreamIdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() { b.Close() })
	return b
}

func connect(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(t.Context(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// Inbound /nova/mcp/1.0.0 streams are attached to ServiceName with their
// line buffer reserved while open, and a peer's streams past the
// service's per-peer limit are reset.
func TestPeerStreamsCountAgainstService(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 2)
	hb := loopbackHost(t, libp2p.ResourceManager(rm))
	startBridge(t, hb, 0)
	ha := loopbackHost(t)
	connect(t, ha, hb)

	open := func() network.Stream {
		t.Helper()
		s, err := ha.NewStream(t.Context(), hb.ID(), ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("{")); err != nil { // a line begun, never ended
			t.Fatal(err)
		}
		return s
	}
	scopetest.FillPeerLimit(t, rm, ServiceName, 2, lineBuffer, open)
}

// A session stream that goes quiet is reset once its idle deadline
// passes, after its first message as before it, and what it held is
// released.
func TestIdlePeerStreamIsReset(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 8)
	hb := loopbackHost(t, libp2p.ResourceManager(rm))
	startBridge(t, hb, 500*time.Millisecond)
	ha := loopbackHost(t)
	connect(t, ha, hb)

	t.Run("silent", func(t *testing.T) {
		s, err := ha.NewStream(t.Context(), hb.ID(), ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(nil); err != nil { // sends the protocol header: the handler starts
			t.Fatal(err)
		}
		scopetest.WaitReset(t, s)
	})
	t.Run("after a message", func(t *testing.T) {
		s, err := ha.NewStream(t.Context(), hb.ID(), ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
		if _, err := s.Write([]byte(init)); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(s).ReadString('\n'); err != nil {
			t.Fatalf("no answer to initialize: %v", err)
		}
		scopetest.WaitReset(t, s)
	})
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsInbound == 0 && st.Memory == 0 })
}

// The session a bridge opens to a peer is attached to ServiceName on both
// sides, and released on both when the bridge closes.
func TestSessionStreamCountsOnBothSides(t *testing.T) {
	rma := scopetest.ResourceManager(t, ServiceName, 8)
	rmb := scopetest.ResourceManager(t, ServiceName, 8)
	ha := loopbackHost(t, libp2p.ResourceManager(rma))
	hb := loopbackHost(t, libp2p.ResourceManager(rmb))
	a := startBridge(t, ha, 0)
	startBridge(t, hb, 0)
	connect(t, ha, hb)

	if _, err := a.session(t.Context(), hb.ID()); err != nil {
		t.Fatal(err)
	}
	scopetest.WaitStat(t, rma, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsOutbound == 1 && st.Memory >= lineBuffer })
	scopetest.WaitStat(t, rmb, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsInbound == 1 && st.Memory >= lineBuffer })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	scopetest.WaitStat(t, rma, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsOutbound == 0 && st.Memory == 0 })
	scopetest.WaitStat(t, rmb, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsInbound == 0 && st.Memory == 0 })
}
