package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/sandbox"
)

// BenchmarkRouterMock is the request/response round trip of two bare
// routers over libp2p's in-memory mock network: no TCP, no encryption, no
// discovery or GossipSub beside them. What is left is the router's own work
// per message, so its CPU and allocations per op are far steadier on a
// noisy machine than BenchmarkRoundTrip's latency: the benchmark to check
// a change of the message path with, before measuring the real thing.
func BenchmarkRouterMock(b *testing.B) {
	b.Run("request", func(b *testing.B) {
		routers, f := mockPair(b)
		ctx := context.Background()
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			env, err := f.New("a0", "a1", envelope.TypeRequest, payload256)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := routers[0].RequestWithin(ctx, env, 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b, b.N)
	})
	b.Run("post", func(b *testing.B) {
		routers, f := mockPair(b)
		ctx := context.Background()
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			env, err := f.New("a0", "a1", envelope.TypeNotification, payload256)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := routers[0].Post(ctx, env); err != nil {
				b.Fatal(err)
			}
		}
		for pending(routers[0]) > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		cpu.report(b, b.N)
	})
}

// mockPair starts two routers on a mock network, a0 on the first and an
// echo agent a1 on the second, sandbox rules enforced, each holding the
// other's card.
func mockPair(b testing.TB) ([2]*protocol.Router, *envelope.Factory) {
	b.Helper()
	return mockPairWith(b, nil)
}

// mockPairWith is mockPair with extra options for router i.
func mockPairWith(b testing.TB, opts func(i int) []protocol.Option) ([2]*protocol.Router, *envelope.Factory) {
	b.Helper()
	routers, _, f := mockPairHosts(b, opts)
	return routers, f
}

// mockPairHosts is mockPairWith that also returns the routers' hosts.
func mockPairHosts(b testing.TB, opts func(i int) []protocol.Option) ([2]*protocol.Router, [2]host.Host, *envelope.Factory) {
	b.Helper()
	mn := mocknet.New()
	b.Cleanup(func() { mn.Close() })
	var hosts [2]host.Host
	for i := range hosts {
		h, err := mn.GenPeer()
		if err != nil {
			b.Fatal(err)
		}
		hosts[i] = h
	}
	connect := func() error {
		if err := mn.LinkAll(); err != nil {
			return err
		}
		return mn.ConnectAllButSelf()
	}
	return routerPair(b, hosts, connect, opts)
}

// tcpPairHosts is mockPairHosts on two real libp2p hosts over TCP on
// 127.0.0.1.
func tcpPairHosts(b testing.TB, opts func(i int) []protocol.Option) ([2]*protocol.Router, [2]host.Host, *envelope.Factory) {
	b.Helper()
	var hosts [2]host.Host
	for i := range hosts {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		hosts[i] = h
	}
	connect := func() error {
		return hosts[0].Connect(b.Context(), peer.AddrInfo{ID: hosts[1].ID(), Addrs: hosts[1].Addrs()})
	}
	return routerPair(b, hosts, connect, opts)
}

// routerPair starts a router on each host, a0 on the first and an echo
// agent a1 on the second, sandbox rules enforced, connects the hosts and
// waits until each router holds the other's card.
func routerPair(b testing.TB, hosts [2]host.Host, connect func() error, opts func(i int) []protocol.Option) ([2]*protocol.Router, [2]host.Host, *envelope.Factory) {
	b.Helper()
	var routers [2]*protocol.Router
	var regs [2]*agentcard.Registry
	f := envelope.NewFactory()
	for i, h := range hosts {
		regs[i] = agentcard.NewRegistry(h.ID())
		name := []string{"a0", "a1"}[i]
		if _, err := regs[i].Register(agentcard.Card{ID: name, Name: name, Version: "1.0.0", Tier: 3,
			Capabilities: []agentcard.Capability{{ID: "echo", Name: "echo"}}}); err != nil {
			b.Fatal(err)
		}
		o := []protocol.Option{protocol.WithSandboxPolicy(sandbox.Policy{Enforced: true}), protocol.WithFactory(f)}
		if opts != nil {
			o = append(o, opts(i)...)
		}
		r, err := protocol.New(h, regs[i], o...)
		if err != nil {
			b.Fatal(err)
		}
		r.Handle(name, func(_ context.Context, env *envelope.Envelope) (any, error) { return env.Payload, nil })
		routers[i] = r
	}
	if err := connect(); err != nil {
		b.Fatal(err)
	}
	for _, r := range routers {
		if err := r.Start(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
	}
	waitfor.Eventually(b, 10*time.Second, func() error {
		if len(regs[0].Remote()) == 0 || len(regs[1].Remote()) == 0 {
			return errors.New("the routers did not exchange cards")
		}
		return nil
	})
	return routers, hosts, f
}

// mockLocal starts one router on a mock network hosting agents names
// (tier 3, no handlers yet): for traffic between agents of one node.
func mockLocal(tb testing.TB, names ...string) (*protocol.Router, *envelope.Factory) {
	tb.Helper()
	mn := mocknet.New()
	tb.Cleanup(func() { mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		tb.Fatal(err)
	}
	reg := agentcard.NewRegistry(h.ID())
	for _, n := range names {
		if _, err := reg.Register(agentcard.Card{ID: n, Name: n, Version: "1.0.0", Tier: 3, Capabilities: []agentcard.Capability{}}); err != nil {
			tb.Fatal(err)
		}
	}
	f := envelope.NewFactory()
	r, err := protocol.New(h, reg, protocol.WithFactory(f))
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r, f
}
