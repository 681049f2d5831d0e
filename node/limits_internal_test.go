package node

import (
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// TestLANIsNotThrottled: many connections from one LAN address are admitted
// (libp2p's default admits 8 per IPv4 address), a public address keeps the
// default cap. Accounting only: nothing is dialed.
func TestLANIsNotThrottled(t *testing.T) {
	rm, err := newResourceManager()
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	open := func(addr string, n int) int {
		ma := multiaddr.StringCast(addr)
		ok := 0
		for i := 0; i < n; i++ {
			if s, err := rm.OpenConnection(network.DirInbound, true, ma); err == nil {
				ok++
				defer s.Done()
			}
		}
		return ok
	}
	if got := open("/ip4/192.168.1.20/tcp/4710", 20); got != 20 {
		t.Fatalf("LAN address: %d of 20 connections admitted", got)
	}
	if got := open("/ip4/127.0.0.1/tcp/4710", 20); got != 20 {
		t.Fatalf("loopback: %d of 20 connections admitted", got)
	}
	if got := open("/ip4/10.0.0.7/tcp/4710", 20); got != 20 {
		t.Fatalf("LAN address: %d of 20 connections admitted", got)
	}
	if got := open("/ip4/203.0.113.7/tcp/4710", 20); got >= 20 {
		t.Fatalf("public address: all %d admitted; the default per-IP cap should still apply", got)
	}
}

// TestProtectAsTag: kad-dht's and GossipSub's protection of a peer, through
// ProtectAsTag's host, is a tag the connection manager weighs when it
// trims, not a protection that keeps the peer above the watermarks; the
// router's own protection (on the host itself) is unchanged.
func TestProtectAsTag(t *testing.T) {
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	soft := ProtectAsTag(h).ConnManager()
	p := peer.ID("peer")
	soft.Protect(p, "kbucket")
	soft.Protect(p, "pubsub:topic")
	if h.ConnManager().IsProtected(p, "") {
		t.Fatal("a protection through ProtectAsTag protects the peer")
	}
	ti := h.ConnManager().GetTagInfo(p)
	if ti == nil || ti.Value != 2*softProtect {
		t.Fatalf("tag info %+v, want value %d", ti, 2*softProtect)
	}
	if soft.Unprotect(p, "kbucket") {
		t.Fatal("Unprotect says the peer is still protected; nobody protects it")
	}
	if ti := h.ConnManager().GetTagInfo(p); ti == nil || ti.Value != softProtect {
		t.Fatalf("after one Unprotect: %+v, want value %d", ti, softProtect)
	}
	h.ConnManager().Protect(p, "nova/channel")
	if !soft.Unprotect(p, "pubsub:topic") {
		t.Fatal("Unprotect does not report the router's protection")
	}
}
