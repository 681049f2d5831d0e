package gossiphealth_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/gossiphealth"
)

const topicName = "nova/test/broadcast"

// member is a loopback host with GossipSub, built as node builds it, on
// the Keeper, subscribed to one topic.
type member struct {
	h     host.Host
	topic *pubsub.Topic
}

func newMember(t *testing.T) member {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"))
	if err != nil {
		t.Fatal(err)
	}
	k := gossiphealth.New(h)
	ps, err := pubsub.NewGossipSub(t.Context(), k.Host(h), k.Option())
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(topicName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.Subscribe(); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the Keeper after GossipSub (t.Context
	// ends before them), the host last.
	t.Cleanup(func() { h.Close() })
	t.Cleanup(func() { k.Close() })
	return member{h: h, topic: topic}
}

// seeEachOther reports whether a and b are on each other's topic.
func seeEachOther(a, b member) error {
	if !slices.Contains(a.topic.ListPeers(), b.h.ID()) {
		return fmt.Errorf("%s does not see %s on the topic", a.h.ID().ShortString(), b.h.ID().ShortString())
	}
	if !slices.Contains(b.topic.ListPeers(), a.h.ID()) {
		return fmt.Errorf("%s does not see %s on the topic", b.h.ID().ShortString(), a.h.ID().ShortString())
	}
	return nil
}

// pubsubStream is h's outbound GossipSub stream to p, if any.
func pubsubStream(h host.Host, p peer.ID) (network.Conn, network.Stream) {
	for _, c := range h.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			if s.Stat().Direction == network.DirOutbound && strings.HasPrefix(string(s.Protocol()), "/meshsub/") {
				return c, s
			}
		}
	}
	return nil, nil
}

// newStreamAfter waits until h has an outbound GossipSub stream to p other
// than old.
func newStreamAfter(t *testing.T, h host.Host, p peer.ID, old network.Stream) {
	t.Helper()
	waitfor.Eventually(t, 20*time.Second, func() error {
		if _, s := pubsubStream(h, p); s == nil || s == old {
			return errors.New("no new pubsub stream yet")
		}
		return nil
	})
}

// When a node's GossipSub stream to a peer dies while the peer stays
// connected, GossipSub forgets the peer's subscriptions and opens a new
// stream, but the peer's own stream lives on and never says them again:
// the peer stays off the topic for good. With the Keeper the peer sends
// them again, and neither side forgets the other.
func TestStreamResetWhilePeerConnected(t *testing.T) {
	a, b := newMember(t), newMember(t)
	if err := a.h.Connect(t.Context(), peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 20*time.Second, func() error { return seeEachOther(a, b) })
	_, s := pubsubStream(a.h, b.h.ID())
	_, sb := pubsubStream(b.h, a.h.ID())
	if s == nil || sb == nil {
		t.Fatal("no pubsub streams")
	}
	_ = s.Reset()
	// a's stream is replaced, and b's, which a asked for again.
	newStreamAfter(t, a.h, b.h.ID(), s)
	newStreamAfter(t, b.h, a.h.ID(), sb)
	waitfor.Eventually(t, 20*time.Second, func() error { return seeEachOther(a, b) })
	if a.h.Network().Connectedness(b.h.ID()) != network.Connected {
		t.Fatal("the connection went down: not the case under test")
	}
}

// Two nodes that dialled each other at once hold two connections; when the
// one that carried a GossipSub stream closes, both still see each other
// on the topic over the other.
func TestDuplicateConnectionClosed(t *testing.T) {
	var a, b member
	for range 20 {
		a, b = newMember(t), newMember(t)
		a.h.Peerstore().AddAddrs(b.h.ID(), b.h.Addrs(), time.Hour)
		b.h.Peerstore().AddAddrs(a.h.ID(), a.h.Addrs(), time.Hour)
		var wg sync.WaitGroup
		wg.Go(func() { _ = a.h.Connect(t.Context(), peer.AddrInfo{ID: b.h.ID()}) })
		wg.Go(func() { _ = b.h.Connect(t.Context(), peer.AddrInfo{ID: a.h.ID()}) })
		wg.Wait()
		if len(a.h.Network().ConnsToPeer(b.h.ID())) >= 2 {
			break
		}
	}
	if len(a.h.Network().ConnsToPeer(b.h.ID())) < 2 {
		t.Skip("no two connections from 20 simultaneous dials")
	}
	waitfor.Eventually(t, 20*time.Second, func() error { return seeEachOther(a, b) })
	c, s := pubsubStream(a.h, b.h.ID())
	cb, sb := pubsubStream(b.h, a.h.ID())
	t.Logf("%d connections; both pubsub streams on one: %v", len(a.h.Network().ConnsToPeer(b.h.ID())), cb.RemoteMultiaddr().Equal(c.LocalMultiaddr()))
	_ = c.Close()
	newStreamAfter(t, a.h, b.h.ID(), s)
	newStreamAfter(t, b.h, a.h.ID(), sb)
	waitfor.Eventually(t, 20*time.Second, func() error { return seeEachOther(a, b) })
	if a.h.Network().Connectedness(b.h.ID()) != network.Connected {
		t.Fatal("the last connection went down: not the case under test")
	}
}
