package protocol_test

import (
	"bufio"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/frame"
	"github.com/nova-node/nova-node/testnet"
)

// payload256 is a 256-byte JSON value (a string of 254 characters).
var payload256 = []byte(`"` + strings.Repeat("x", 254) + `"`)

// BenchmarkRoundTrip measures a request/response between agents on two
// nodes over loopback, next to a raw libp2p stream echo of the same 256-byte
// payload on the same transport in the same run. Reported: mean ns/op and
// p50/p99 in µs. See docs/benchmarks.md.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tr := range []testnet.Transport{testnet.TCP, testnet.QUIC} {
		b.Run("raw-stream-"+string(tr), func(b *testing.B) { benchRaw(b, tr) })
		b.Run("nova-request-"+string(tr), func(b *testing.B) { benchNova(b, tr) })
	}
}

func benchRaw(b *testing.B, tr testnet.Transport) {
	const proto = "/bench/echo/1.0.0"
	srv, err := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(tr)...))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cli, err := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(tr)...))
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	srv.SetStreamHandler(proto, func(s network.Stream) {
		fr := frame.NewReader(s, 0)
		w := bufio.NewWriter(s)
		for {
			body, err := fr.Next()
			if err != nil {
				s.Reset()
				return
			}
			if frame.Write(w, body) != nil || w.Flush() != nil {
				s.Reset()
				return
			}
		}
	})
	ctx := context.Background()
	if err := cli.Connect(ctx, peer.AddrInfo{ID: srv.ID(), Addrs: srv.Addrs()}); err != nil {
		b.Fatal(err)
	}
	s, err := cli.NewStream(ctx, srv.ID(), proto)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fr := frame.NewReader(s, 0)
	msg := frame.Append(nil, payload256)
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := fr.Next(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func benchNova(b *testing.B, tr testnet.Transport) {
	net := testnet.New(b, 2, testnet.WithTransport(tr))
	net.Connect(0, 1)
	net.WaitForCards()
	n := net.Nodes[0]
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		t0 := time.Now()
		env, err := n.NewEnvelope("a0", "a1", envelope.TypeRequest, payload256)
		if err != nil {
			b.Fatal(err)
		}
		resp, _, err := n.Request(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Payload) != len(payload256) {
			b.Fatalf("payload %d bytes", len(resp.Payload))
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

var _ = io.EOF
