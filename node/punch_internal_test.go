package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// Two peers that met over a relay while one of them could not hole punch
// yet: once both speak DCUtR, the end that dialled closes the relayed
// connection and dials again, so the other end receives a relayed
// connection it can punch from (here, where b's addresses are dialable,
// the dial goes direct). Loopback hosts never have the public
// address go-libp2p's hole punch service waits for, so each end here
// announces DCUtR itself, which is what the service does once ready.
func TestPunchAgainRedialsOnceBothEndsCanPunch(t *testing.T) {
	for _, first := range []string{"dialled end", "dialling end"} {
		t.Run(first+" ready first", func(t *testing.T) {
			relay, a, b := relayedPair(t)
			inbound := make(chan network.Conn, 8)
			b.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
				if c.RemotePeer() == a.ID() {
					inbound <- c
				}
			}})
			punchAgainOverRelay(t, relay, a, b)
			c1 := <-inbound
			if !relayed(c1) {
				t.Fatalf("b's first connection from a is not relayed: %v", c1.RemoteMultiaddr())
			}
			// identify of the relayed connection, without DCUtR on either end
			waitfor.Eventually(t, 10*time.Second, func() error {
				if len(b.Peerstore().Addrs(a.ID())) == 0 {
					return errors.New("b has not identified a yet")
				}
				return nil
			})
			ready := func(h host.Host) { h.SetStreamHandler(holepunch.Protocol, func(s network.Stream) { _ = s.Reset() }) }
			if first == "dialled end" {
				ready(b)
				waitfor.Eventually(t, 10*time.Second, func() error {
					if !supports(a, b.ID(), holepunch.Protocol) {
						return errors.New("a has not heard that b speaks DCUtR")
					}
					return nil
				})
				ready(a)
			} else {
				ready(a)
				ready(b)
			}
			select {
			case c2 := <-inbound:
				// On loopback the dial goes direct; behind two NATs it goes
				// over the relay again and b punches.
				if c2 == c1 || !c1.IsClosed() {
					t.Fatalf("the second connection is the first one, or the first is still open")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("a did not close its relayed connection and dial b again once both could punch")
			}
		})
	}
}

// punchAgainOverRelay starts a's punchAgain and connects a to b through
// relay.
func punchAgainOverRelay(t *testing.T, relay, a, b host.Host) {
	t.Helper()
	p, err := startPunchAgain(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.close() })
	circuit := multiaddr.StringCast("/p2p/" + relay.ID().String() + "/p2p-circuit")
	if err := a.Connect(t.Context(), peer.AddrInfo{ID: b.ID(), Addrs: []multiaddr.Multiaddr{relay.Addrs()[0].Encapsulate(circuit)}}); err != nil {
		t.Fatal(err)
	}
}

// relayedPair is a relay on loopback and two hosts, the second holding a
// reservation on it.
func relayedPair(t *testing.T) (relay, a, b host.Host) {
	t.Helper()
	newHost := func(opts ...libp2p.Option) host.Host {
		h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	relay = newHost()
	rc := relayResources()
	r, err := relayv2.New(relay, relayv2.WithResources(rc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	a, b = newHost(libp2p.EnableRelay()), newHost(libp2p.EnableRelay())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ri := peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}
	if err := b.Connect(ctx, ri); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, b, ri); err != nil {
		t.Fatal(err)
	}
	return relay, a, b
}

// A relayed connection beside a direct one to the same peer is closed
// after relayedGrace; the direct one stays.
func TestPunchAgainClosesSupersededRelayedConnections(t *testing.T) {
	relay, a, b := relayedPair(t)
	punchAgainOverRelay(t, relay, a, b)
	a.Peerstore().AddAddrs(b.ID(), b.Addrs(), time.Hour)
	direct, err := a.Network().DialPeer(network.WithForceDirectDial(t.Context(), "test"), b.ID())
	if err != nil {
		t.Fatal(err)
	}
	if relayed(direct) {
		t.Fatalf("the forced direct dial gave a relayed connection: %v", direct.RemoteMultiaddr())
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		for _, c := range a.Network().ConnsToPeer(b.ID()) {
			if relayed(c) {
				return fmt.Errorf("the relayed connection is still open: %v", c.RemoteMultiaddr())
			}
		}
		return nil
	})
	if direct.IsClosed() {
		t.Fatal("the direct connection was closed")
	}
}
