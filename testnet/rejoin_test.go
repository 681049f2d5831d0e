package testnet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/testnet"
)

// A node that joined the swarm by hand (Connect) and is later left with no
// connection and an empty routing table (a laptop whose every peer
// trimmed or dropped it, or that slept) dials the peer it joined through
// again by itself. Nothing else would: neither routing table holds the
// other, the node has no bootstrap peers, and nothing waits on the peer.
func TestRejoinWhenAlone(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP))
	a, b := net.Nodes[0], net.Nodes[1]
	ctx := t.Context()
	if _, err := a.Connect(ctx, b.Addrs()[0].String()+"/p2p/"+b.ID().String()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if a.DiscoveryStats().RoutingTable == 0 || b.DiscoveryStats().RoutingTable == 0 {
			return errors.New("the nodes are not in each other's routing table yet")
		}
		return nil
	})

	// Cut them apart; a lookup on each dials the other, fails, and drops
	// it from the routing table.
	net.Partition([]int{0}, []int{1})
	waitfor.Eventually(t, 30*time.Second, func() error {
		for _, nd := range net.Nodes {
			if nd.DiscoveryStats().RoutingTable > 0 {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				_, _ = nd.FindAgents(lctx, "nobody", "", "", "")
				cancel()
			}
		}
		if a.DiscoveryStats().RoutingTable > 0 || b.DiscoveryStats().RoutingTable > 0 {
			return errors.New("a routing table still holds the other node")
		}
		return nil
	})
	if a.Host().Network().Connectedness(b.ID()) == network.Connected {
		t.Fatal("still connected across the partition")
	}
	net.Lift([]int{0}, []int{1}) // they may meet again, but nobody dials
	waitfor.Eventually(t, 30*time.Second, func() error {
		if a.Host().Network().Connectedness(b.ID()) != network.Connected {
			return errors.New("a has not dialled b again")
		}
		return nil
	})
	// a's way back is its own dial of the peer it joined through: its
	// rejoin, or its DHT's bootstrap with the same peers when the routing
	// table emptied (whichever comes first; both take JoinedVia's list).
	for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
		if c.Stat().Direction != network.DirOutbound {
			t.Errorf("a is connected to b again, but b dialled (a connection %v)", c.Stat().Direction)
		}
	}
}
