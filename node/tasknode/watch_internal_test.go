package tasknode

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node/localapi"
)

// A peer that closed its connection to this node (as its connection
// manager does to stay within its watermarks) and runs none of this
// node's sub-tasks is not dialled back when its wait ends: dialling every
// trimmed peer back a second later undid the trimming, over and over, and
// was most of an idle node's CPU in a 100-node swarm.
func TestIdleTrimmedPeerIsNotDialledBack(t *testing.T) {
	a, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var inbound atomic.Int32 // connections a opened to b
	b.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == a.ID() {
			inbound.Add(1)
		}
	}})

	ts := New(Config{
		Host:     a,
		Registry: agentcard.NewRegistry(a.ID()),
		Subscribe: func(int, ...string) (<-chan localapi.Event, func()) {
			return make(chan localapi.Event), func() {}
		},
		Options: TaskOptions{PeerGoneAfter: 50 * time.Millisecond},
	})
	watching := make(chan struct{})
	due := make(chan bool, 1)
	ts.hooks.watching = func() { close(watching) }
	ts.hooks.due = func(p peer.ID, probed bool) {
		if p == b.ID() {
			due <- probed
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); ts.watchPeers(ctx) }()
	defer func() { cancel(); <-done }()
	<-watching

	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []multiaddr.Multiaddr{b.Addrs()[0]}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Network().ClosePeer(a.ID()); err != nil { // b trims a
		t.Fatal(err)
	}
	select {
	case probed := <-due:
		if probed {
			t.Fatal("a peer running none of this node's sub-tasks was dialled back after its wait")
		}
	case <-ctx.Done():
		t.Fatal("the trimmed peer's wait never ended")
	}
	if n := inbound.Load(); n != 1 {
		t.Fatalf("b saw %d connections from a, want 1 (no dial back)", n)
	}
	if c := a.Network().Connectedness(b.ID()); c == network.Connected {
		t.Fatalf("a is connected to b again: %v", c)
	}
}
