package protocol_test

import (
	"fmt"
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

// TestRedialRestoresForgottenAddresses: a peer that told us, as it
// closed, that it has no addresses (go-libp2p's identify does so while its
// host shuts down, a race the receiving peer loses now and then) is
// dialled where it was last reached when it is back: its redials failed
// with "no addresses" although it listened at the same address again.
func TestRedialRestoresForgottenAddresses(t *testing.T) {
	routers, hosts, f := tcpPairHosts(t, func(i int) []protocol.Option {
		if i != 0 {
			return nil
		}
		return []protocol.Option{protocol.WithRetry(3, 100*time.Millisecond)}
	})
	a, b := hosts[0], hosts[1]
	request := func() error {
		env, err := f.New("a0", "a1", envelope.TypeRequest, []byte(`"are you there"`))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = routers[0].RequestWithin(t.Context(), env, 10*time.Second)
		return err
	}
	if err := request(); err != nil {
		t.Fatalf("first request: %v", err)
	}
	cutOff(b, a.ID())
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if a.Network().Connectedness(b.ID()) == network.Connected {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	a.Peerstore().ClearAddrs(b.ID()) // what the empty identify push does
	if err := request(); err != nil {
		t.Fatalf("request after the peerstore forgot the peer's addresses: %v", err)
	}
}

// cutOff leaves h only a closed port on loopback as p's address, so that
// h cannot dial p: an empty entry would be refilled from where h last
// reached p (Router.restoreAddrs).
func cutOff(h host.Host, p peer.ID) {
	h.Peerstore().ClearAddrs(p)
	h.Peerstore().AddAddr(p, multiaddr.StringCast("/ip4/127.0.0.1/tcp/1"), peerstore.TempAddrTTL)
}
