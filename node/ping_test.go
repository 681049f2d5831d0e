package node_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
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
	if _, err := a.Ping(ctx, a.ID().String(), 1); err == nil {
		t.Fatal("a node pinged itself")
	}
	if _, err := a.Ping(ctx, "nobody@"+b.ID().String(), 1); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("ping of an unknown agent: %v", err)
	}
}
