package testnet_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// memStream is the peer side of a multistream-select negotiation in
// memory: reads come from in, writes are dropped.
type memStream struct{ in *bytes.Buffer }

func (m memStream) Read(p []byte) (int, error)  { return m.in.Read(p) }
func (m memStream) Write(p []byte) (int, error) { return len(p), nil }
func (m memStream) Close() error                { return nil }

// countInboundA2A puts a counter in front of h's /nova/a2a stream handler:
// every stream a peer opens on that protocol is counted, then handed to
// the router's own handler. The router's handler is found the way a peer's
// stream finds it, by negotiating the protocol with h's muxer (here on an
// in-memory stream).
func countInboundA2A(t *testing.T, h host.Host) *atomic.Int64 {
	t.Helper()
	var in bytes.Buffer
	for _, tok := range []string{"/multistream/1.0.0", string(protocol.IDA2A)} {
		in.Write(binary.AppendUvarint(nil, uint64(len(tok)+1)))
		in.WriteString(tok + "\n")
	}
	id, handle, err := h.Mux().Negotiate(memStream{&in})
	if err != nil || id != protocol.IDA2A || handle == nil {
		t.Fatalf("no handler for %s on %s: %v", protocol.IDA2A, h.ID(), err)
	}
	var n atomic.Int64
	h.SetStreamHandler(protocol.IDA2A, func(s network.Stream) {
		n.Add(1)
		_ = handle(protocol.IDA2A, s)
	})
	return &n
}

// a2aStreams lists the ids of h's open /nova/a2a streams to p that h
// opened (outbound) and that p opened (inbound), sorted.
func a2aStreams(h host.Host, p peer.ID) (out, in []string) {
	for _, c := range h.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			if s.Protocol() != protocol.IDA2A {
				continue
			}
			if s.Stat().Direction == network.DirOutbound {
				out = append(out, s.ID())
			} else {
				in = append(in, s.ID())
			}
		}
	}
	slices.Sort(out)
	slices.Sort(in)
	return out, in
}

// TestStreamsReusedAcrossMessages: the performance rule "keep streams
// long-lived and reuse them, never a new stream per message". Between two
// nodes, each opens one /nova/a2a stream to the other (protocol's stream():
// one outbound per peer, shared by every agent-pair channel) and every
// envelope rides on those two: 200 notifications and 50 requests from a0 to
// agents on node 1, requests both ways between a second pair (b0, b1), and
// the answers. The number of streams opened does not grow with the number
// of messages: it is the same after the first half of the traffic and
// after the second, and the streams open at the end are the ones open
// before any of it.
func TestStreamsReusedAcrossMessages(t *testing.T) {
	rec := &recorder{}
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = append(c.Agents, node.DefaultAgent(fmt.Sprintf("b%d", i)))
	}))
	rec.register(t)(net.Nodes[1])
	opened := [2]*atomic.Int64{} // streams node i accepted from the other
	for i, n := range net.Nodes {
		opened[i] = countInboundA2A(t, n.Host())
	}
	net.Connect(0, 1)
	net.WaitForCards()

	ask := func(n *node.Node, from, to string, k int) {
		t.Helper()
		resp, _, err := request(t, n, from, to, k)
		if err != nil {
			t.Fatalf("%s -> %s request %d: %v", from, to, k, err)
		}
		if string(resp.Payload) != fmt.Sprint(k) {
			t.Fatalf("%s -> %s request %d answered %s", from, to, k, resp.Payload)
		}
	}
	// One round trip each way, so each node has opened its stream (the
	// greeting usually has by now).
	ask(net.Nodes[0], "b0", "b1", -1)
	ask(net.Nodes[1], "b1", "b0", -1)
	h0, h1 := net.Nodes[0].Host(), net.Nodes[1].Host()
	out0, _ := a2aStreams(h0, h1.ID())
	out1, _ := a2aStreams(h1, h0.ID())
	if len(out0) != 1 || len(out1) != 1 {
		t.Fatalf("outbound /nova/a2a streams: node 0 has %v, node 1 has %v; want one each", out0, out1)
	}
	counts := func() [2]int64 { return [2]int64{opened[0].Load(), opened[1].Load()} }
	before := counts()
	if before != [2]int64{1, 1} {
		t.Fatalf("streams accepted (node 0, node 1) before the traffic: %v, want one each way", before)
	}

	half := func(h int) {
		postN(t, net.Nodes[0], h*100, h*100+100) // a0 -> sink
		for k := 0; k < 25; k++ {
			ask(net.Nodes[0], "a0", "a1", h*25+k)
		}
		for k := 0; k < 5; k++ {
			ask(net.Nodes[0], "b0", "b1", k)
			ask(net.Nodes[1], "b1", "b0", k)
			env, _ := net.Nodes[0].NewEnvelope("b0", "b1", envelope.TypeNotification, k)
			if _, err := net.Nodes[0].Send(t.Context(), env); err != nil {
				t.Fatalf("b0 -> b1 notification %d: %v", k, err)
			}
		}
		waitfor.Eventually(t, 10*time.Second, func() error {
			if rec.len() < h*100+100 {
				return fmt.Errorf("%d of %d notifications received", rec.len(), h*100+100)
			}
			return nil
		})
	}
	half(0)
	mid := counts()
	half(1)
	after := counts()
	rec.exactlyOnceInOrder(t, 200)

	if mid != before || after != before {
		t.Fatalf("streams accepted (node 0, node 1): %v before the traffic, %v after half of it, %v after all of it: streams are not reused", before, mid, after)
	}
	if o, _ := a2aStreams(h0, h1.ID()); !slices.Equal(o, out0) {
		t.Fatalf("node 0's outbound /nova/a2a streams were %v, now %v", out0, o)
	}
	if o, _ := a2aStreams(h1, h0.ID()); !slices.Equal(o, out1) {
		t.Fatalf("node 1's outbound /nova/a2a streams were %v, now %v", out1, o)
	}
}
