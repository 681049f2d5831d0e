package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/envelope"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// A peer that presents valid cards is told as a member each time, also when
// this node held every one of them already: a node hears of a member's
// cards through the roster's gossip or the DHT as often as through its
// hello, and one told only of new cards never tagged such a peer, so its
// relay refused that peer's reservations for good.
func TestMembersToldWhenCardsAlreadyHeld(t *testing.T) {
	var mu sync.Mutex
	told := map[peer.ID]int{}
	routers, hosts, _ := mockPairHosts(t, func(i int) []protocol.Option {
		if i != 1 {
			return nil
		}
		return []protocol.Option{protocol.WithMembers(func(p peer.ID) {
			mu.Lock()
			told[p]++
			mu.Unlock()
		})}
	})
	a := hosts[0]
	count := func() int { mu.Lock(); defer mu.Unlock(); return told[a.ID()] }
	waitfor.Eventually(t, 10*time.Second, func() error {
		if count() == 0 {
			return fmt.Errorf("a's first hello not told")
		}
		return nil
	})
	first := count()
	// b holds a's cards now; a presents the same ones again (its hello
	// refresh, as on every reconnection).
	routers[0].Announce()
	waitfor.Eventually(t, 10*time.Second, func() error {
		if count() <= first {
			return fmt.Errorf("a's hello of cards b held already not told (told %d times)", count())
		}
		return nil
	})
}

// A peer whose addresses the peerstore no longer holds rightly (a laptop
// that took relay addresses after this node learnt its private ones) is
// reached at the addresses the peer finder gives once the dial failed, in
// the same open: the request below gets one dial (no redials). The finder
// works as the node's does, kad-dht's FindPeer: its lookup adds what it
// hears to the peerstore and it answers with the peerstore's addresses.
func TestPeerFinderAddressesAfterFailedDial(t *testing.T) {
	var asked atomic.Int32
	var a, b host.Host
	routers, hosts, f := tcpPairHosts(t, func(i int) []protocol.Option {
		if i != 0 {
			return nil
		}
		return []protocol.Option{protocol.WithRetry(0, time.Millisecond), protocol.WithPeerFinder(func(_ context.Context, p peer.ID) ([]multiaddr.Multiaddr, error) {
			asked.Add(1)
			// kad-dht adds what it hears with TempAddrTTL; here a longer
			// TTL, since identify's handling of the closed connection may
			// run late and drop every temporary address of b it finds.
			a.Peerstore().AddAddrs(p, b.Addrs(), peerstore.AddressTTL)
			return a.Peerstore().Addrs(p), nil
		})}
	})
	a, b = hosts[0], hosts[1]
	// A round cuts a from b and sends; a connection either side makes
	// again before the request (a redial or a greeting racing the close)
	// carries it without a question, and the round is run again.
	for round := 0; asked.Load() == 0; round++ {
		if round == 5 {
			t.Fatal("delivered without asking the peer finder in 5 rounds: the test did not make the dial fail")
		}
		peerFinderRound(t, a, b, routers[0], f, &asked)
	}
}

// peerFinderRound takes b's addresses from a's peerstore and a's from b's,
// closes their connection, leaves a a stale address of b and sends a
// request from a0 to a1: the request whose open asked the finder must
// succeed.
func peerFinderRound(t *testing.T, a, b host.Host, r *protocol.Router, f *envelope.Factory, asked *atomic.Int32) {
	a.Peerstore().ClearAddrs(b.ID())
	b.Peerstore().ClearAddrs(a.ID())
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if c := a.Network().Connectedness(b.ID()); c == network.Connected {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	// A stale address: a closed port on loopback, refused at once.
	cutOff(a, b.ID())
	// The router may not have seen its stream to b end with the
	// connection yet: a request written there fails without a dial.
	for i := 0; ; i++ {
		env, err := f.New("a0", "a1", envelope.TypeRequest, []byte(`"where are you"`))
		if err != nil {
			t.Fatal(err)
		}
		before := asked.Load()
		_, _, err = r.RequestWithin(t.Context(), env, 10*time.Second)
		if err == nil {
			return
		}
		if asked.Load() > before || i == 5 {
			t.Fatalf("request after the peer finder gave the address: %v (finder asked %d times)", err, asked.Load())
		}
	}
}
