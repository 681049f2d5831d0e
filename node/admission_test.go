package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// A node whose inbound-connection limit is full of throw-away keys that
// never speak nova still admits a new member: the connection manager's
// watermarks sit below the limit, so trimming frees room, and it trims the
// throw-away connections, not the member's.
func TestAdmissionTrimsThrowAwayPeersFirst(t *testing.T) {
	const limit = 24 // low watermark 12, high 18
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		if i == 0 {
			// No background trim during the test: it trims when it says so.
			c.Admission = node.Admission{InboundConns: limit, GracePeriod: time.Nanosecond, TrimInterval: time.Hour}
		}
	}))
	a, b := net.Nodes[0], net.Nodes[1]
	target := net.Info(0)
	junk := func() error {
		h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Transport(tcp.NewTCPTransport))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return h.Connect(ctx, target)
	}
	// fill dials throw-away hosts until the node refuses one: its inbound
	// limit is full, and a newcomer would be refused too.
	fill := func() {
		t.Helper()
		for n := 0; junk() == nil; n++ {
			if n > 2*limit {
				t.Fatalf("%d throw-away connections admitted past an inbound limit of %d", n, limit)
			}
		}
		in := 0
		for _, c := range a.Host().Network().Conns() {
			if c.Stat().Direction == network.DirInbound {
				in++
			}
		}
		if in <= limit*3/4 {
			t.Fatalf("a connection refused with %d inbound, below the high watermark", in)
		}
	}
	trim := func() {
		t.Helper()
		a.Host().ConnManager().TrimOpenConns(t.Context())
		waitfor.Eventually(t, 5*time.Second, func() error {
			// The low watermark counts the connections trimming may close:
			// the member's are kept on top.
			n := 0
			for _, p := range a.Host().Network().Peers() {
				if p != b.ID() {
					n++
				}
			}
			if n > limit/2 {
				return fmt.Errorf("%d throw-away peers connected after the trim, want at most %d", n, limit/2)
			}
			return nil
		})
	}
	ask := func(text string) {
		t.Helper()
		env, err := b.NewEnvelope("a1", "a0", envelope.TypeRequest, text)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, _, err := b.Request(ctx, env)
		if err != nil {
			t.Fatalf("request from the member: %v", err)
		}
		if want := fmt.Sprintf("%q", text); string(resp.Payload) != want {
			t.Fatalf("response %s, want %s", resp.Payload, want)
		}
	}

	fill()
	trim()
	net.Connect(1, 0)
	net.WaitForCards()
	ask("first")
	waitfor.Eventually(t, 5*time.Second, func() error {
		if ti := a.Host().ConnManager().GetTagInfo(b.ID()); ti == nil || ti.Tags["nova/member"] == 0 {
			return fmt.Errorf("the member is not tagged: %+v", ti)
		}
		return nil
	})

	fill()
	trim()
	if a.Host().Network().Connectedness(b.ID()) != network.Connected {
		t.Fatal("the trim closed the member's connection")
	}
	ask("second")
}
