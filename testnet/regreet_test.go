package testnet_test

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// A node whose stream to a peer dies while the peer stays connected (as
// when one of two simultaneous connections closes) greets the peer again
// on its own: the peer learns its cards in about a second, not at the
// hello refresh three minutes later.
func TestRegreetAfterStreamLoss(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]
	addr := "a0@" + a.Host().ID().String()
	if _, err := b.Registry().Resolve(addr); err != nil {
		t.Fatal(err)
	}
	// b forgets a's cards (as when they expire), then a's stream to b dies.
	b.Registry().RemovePeer(a.Host().ID())
	reset := 0
	for _, c := range a.Host().Network().ConnsToPeer(b.Host().ID()) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == protocol.IDA2A && s.Stat().Direction == network.DirOutbound {
				_ = s.Reset()
				reset++
			}
		}
	}
	if reset == 0 {
		t.Fatal("no outbound a2a stream to reset")
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		_, err := b.Registry().Resolve(addr)
		return err
	})
	if a.Host().Network().Connectedness(b.Host().ID()) != network.Connected {
		t.Fatal("the connection itself went down: not the case under test")
	}
}
