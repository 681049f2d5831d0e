package node_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// Ping measures round trips to a peer, by peer ID or by an agent it hosts,
// and reports times to the microsecond (`ping --json` printed an average
// of 0.17566666666666667 ms).
func TestPing(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP))
	net.Connect(0, 1)
	net.WaitForCards()
	ctx := context.Background()
	a, b := net.Nodes[0], net.Nodes[1]
	agent := b.Registry().Local()[0]
	for _, target := range []string{b.ID().String(), agent.Address(), agent.ID} {
		res, err := a.Ping(ctx, target, 3)
		if err != nil {
			t.Fatalf("ping %s: %v", target, err)
		}
		if res.Peer != b.ID().String() || len(res.RTTs) != 3 || res.Path != "direct" || res.Addr == "" {
			t.Fatalf("ping %s: %+v", target, res)
		}
		if target != b.ID().String() && res.Agent != agent.Address() {
			t.Fatalf("ping %s: agent %q", target, res.Agent)
		}
		if res.Average <= 0 || math.Abs(res.Average*1000-math.Round(res.Average*1000)) > 1e-6 {
			t.Fatalf("ping %s: average %v ms is not to the microsecond", target, res.Average)
		}
	}
	// The node itself, or an agent it hosts, is reachable with no network
	// between: a success with path "local", not an error.
	own := a.Registry().Local()[0]
	for _, target := range []string{a.ID().String(), own.ID} {
		res, err := a.Ping(ctx, target, 1)
		if err != nil || res.Path != "local" || len(res.RTTs) != 0 || res.Peer != a.ID().String() {
			t.Fatalf("ping %s (this node): %+v, %v", target, res, err)
		}
	}
	if _, err := a.Ping(ctx, "nobody@"+b.ID().String(), 1); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("ping of an unknown agent: %v", err)
	}
}

// A peer this node failed to dial a moment ago is in libp2p's dial
// backoff; ping dials it anyway, as a send does (the user asks now, and
// the peer may be back). A peer it cannot reach fails with
// PEER_UNREACHABLE.
func TestPingClearsDialBackoff(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP))
	a, b := net.Nodes[0], net.Nodes[1]
	sw := a.Host().Network().(*swarm.Swarm)
	a.Host().Peerstore().AddAddrs(b.ID(), b.Addrs(), peerstore.PermanentAddrTTL)
	for _, addr := range b.Addrs() {
		sw.Backoff().AddBackoff(b.ID(), addr)
	}
	res, err := a.Ping(t.Context(), b.ID().String(), 1)
	if err != nil || len(res.RTTs) != 1 {
		t.Fatalf("ping of a peer in dial backoff: %+v, %v", res, err)
	}

	stranger, err := peer.Decode("12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Ping(t.Context(), stranger.String(), 1)
	var pu *node.PeerUnreachableError
	if !errors.As(err, &pu) || pu.Code() != "PEER_UNREACHABLE" || !strings.Contains(err.Error(), "knows no address") {
		t.Fatalf("ping of a peer with no known address: %v", err)
	}
}
