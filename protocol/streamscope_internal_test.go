package protocol

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/streamscope/scopetest"
)

// An inbound /nova/a2a/1.0.0 stream is attached to ServiceName with its
// buffers reserved while it is open, a peer's streams past the service's
// per-peer limit are reset, and what a stream held is released when it
// ends.
func TestInboundStreamsCountAgainstService(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 2)
	b := loopbackHost(t, libp2p.ResourceManager(rm))
	startRouter(t, b, []string{"b0"})
	a := loopbackHost(t)
	connectHosts(t, a, b)

	open := func() network.Stream {
		t.Helper()
		s, err := a.NewStream(t.Context(), b.ID(), IDA2A)
		if err != nil {
			t.Fatal(err)
		}
		// A length prefix without its body: the handler starts and
		// waits for the rest.
		if _, err := s.Write([]byte{5}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	held := scopetest.FillPeerLimit(t, rm, ServiceName, 2, inStreamBuffers, open) // a third is reset
	if st := scopetest.Stat(t, rm, ServiceName); st.NumStreamsInbound != 2 {
		t.Fatalf("%d inbound streams counted after the refusal, want 2", st.NumStreamsInbound)
	}

	// A frame that is not a message ends its stream with a reset, and the
	// stream's memory goes back.
	if _, err := held[0].Write([]byte{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	scopetest.WaitReset(t, held[0])
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool {
		return st.NumStreamsInbound == 1 && st.Memory == int64(inStreamBuffers)
	})
}

// An inbound stream whose first frame does not come within the first
// frame's timeout (here the idle timeout, shorter) is reset, and its
// memory released.
func TestInboundStreamWithoutFirstFrameIsReset(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 8)
	b := loopbackHost(t, libp2p.ResourceManager(rm))
	short := func(o *options) error { o.idleTimeout = 100 * time.Millisecond; return nil }
	startRouter(t, b, []string{"b0"}, short)
	a := loopbackHost(t)
	connectHosts(t, a, b)
	s, err := a.NewStream(t.Context(), b.ID(), IDA2A)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte{5}); err != nil { // the handler starts, the frame never ends
		t.Fatal(err)
	}
	scopetest.WaitReset(t, s)
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsInbound == 0 && st.Memory == 0 })
}

// The stream a router opens to a peer (its hello goes first) is attached to
// ServiceName with its writer's buffer reserved, and gives it back when the
// stream ends.
func TestOutboundStreamsCountAgainstService(t *testing.T) {
	rm := scopetest.ResourceManager(t, ServiceName, 8)
	a := loopbackHost(t, libp2p.ResourceManager(rm))
	ra, _ := startRouter(t, a, []string{"a0"})
	b := loopbackHost(t)
	startRouter(t, b, []string{"b0"})
	connectHosts(t, a, b)
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool {
		return st.NumStreamsOutbound == 1 && st.Memory >= int64(outStreamBuffers)
	})
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	scopetest.WaitStat(t, rm, ServiceName, func(st network.ScopeStat) bool { return st.NumStreamsOutbound == 0 && st.Memory == 0 })
}
