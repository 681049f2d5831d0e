package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
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
