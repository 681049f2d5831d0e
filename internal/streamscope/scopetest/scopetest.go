// Package scopetest builds resource managers for the tests of nova's
// stream handlers, and reads what a service holds.
package scopetest

import (
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// ResourceManager returns libp2p's default resource manager with service
// limited to perPeer inbound (and outbound) streams per peer, closed by
// t.Cleanup. Pass it to libp2p.ResourceManager.
func ResourceManager(t testing.TB, service string, perPeer int) network.ResourceManager {
	t.Helper()
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.AddServicePeerLimit(service,
		rcmgr.BaseLimit{StreamsInbound: perPeer, StreamsOutbound: perPeer, Streams: 2 * perPeer, Memory: 64 << 20},
		rcmgr.BaseLimitIncrease{})
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	return rm
}

// Stat is what service holds now in rm.
func Stat(t testing.TB, rm network.ResourceManager, service string) network.ScopeStat {
	t.Helper()
	var st network.ScopeStat
	if err := rm.ViewService(service, func(s network.ServiceScope) error {
		st = s.Stat()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// WaitStat polls, every few milliseconds for up to 10 s, until what
// service holds in rm satisfies ok, and fails t with the last stat if it
// never does.
func WaitStat(t testing.TB, rm network.ResourceManager, service string, ok func(network.ScopeStat) bool) network.ScopeStat {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		st := Stat(t, rm, service)
		if ok(st) {
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("service %s: %+v", service, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitReset reads s until it fails, which must be a reset by the remote
// side: the stream was refused or ended on an error. A read deadline of
// 10 s keeps a stream that stays open from hanging the test.
func WaitReset(t testing.TB, s network.Stream) {
	t.Helper()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4<<10)
	for {
		_, err := s.Read(buf)
		if err == nil {
			continue
		}
		if !errors.Is(err, network.ErrReset) {
			t.Fatalf("stream ended with %v, want a reset", err)
		}
		return
	}
}

// FillPeerLimit opens limit streams with open, checking after each that
// service counts it with at least perStream bytes reserved for each, then
// one more, which must be reset (past the per-peer limit). It returns the
// streams held.
func FillPeerLimit(t testing.TB, rm network.ResourceManager, service string, limit, perStream int, open func() network.Stream) []network.Stream {
	t.Helper()
	var held []network.Stream
	for i := 1; i <= limit; i++ {
		held = append(held, open())
		st := WaitStat(t, rm, service, func(st network.ScopeStat) bool { return st.NumStreamsInbound == i })
		if st.Memory < int64(i*perStream) {
			t.Fatalf("%d streams open, %d bytes reserved; want at least %d", i, st.Memory, i*perStream)
		}
	}
	WaitReset(t, open())
	return held
}
