package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/cputime"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
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
		b.Run("raw-stream-"+string(tr), func(b *testing.B) { benchRaw(b, tr, 0) })
		b.Run("nova-request-"+string(tr), func(b *testing.B) { benchNova(b, tr, 0) })
	}
	b.Run("http-jsonrpc-keepalive", func(b *testing.B) { benchHTTP(b, 0, false) })
	b.Run("http-jsonrpc-decoded", func(b *testing.B) { benchHTTP(b, 0, true) })
}

// BenchmarkRoundTripGaps is BenchmarkRoundTrip with 20 ms between requests
// (connections idle, goroutines parked): the latency an agent sees when it
// talks now and then rather than in a tight loop, measured from 3 s after
// the connection (settleFor). Use -benchtime 300x.
func BenchmarkRoundTripGaps(b *testing.B) {
	const gap = 20 * time.Millisecond
	b.Run("raw-stream-tcp", func(b *testing.B) { benchRaw(b, testnet.TCP, gap) })
	b.Run("nova-request-tcp", func(b *testing.B) { benchNova(b, testnet.TCP, gap) })
	b.Run("http-jsonrpc-keepalive", func(b *testing.B) { benchHTTP(b, gap, false) })
	b.Run("http-jsonrpc-decoded", func(b *testing.B) { benchHTTP(b, gap, true) })
}

// benchHTTP is a JSON-RPC 2.0 round trip over HTTP/1.1 keep-alive on
// loopback with the same payload: the usual way agents call each other.
// With decode, the client decodes the answer as a JSON-RPC client must (its
// id, and its result or error), as nova's requester decodes and checks the
// answer envelope; without, it reads the body and drops it unparsed (the
// baseline of sessions 1 to 6, kept for comparison).
func benchHTTP(b *testing.B, gap time.Duration, decode bool) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     int             `json:"id"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": req.Params})
	}))
	defer srv.Close()
	cl := srv.Client()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":` + string(payload256) + `}`)
	lat := make([]time.Duration, 0, 1<<16)
	cpu := startCPU()
	for b.Loop() {
		if gap > 0 {
			time.Sleep(gap)
		}
		t0 := time.Now()
		resp, err := cl.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if decode {
			var ans struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			err = json.NewDecoder(resp.Body).Decode(&ans)
			if err == nil && (ans.ID != 1 || ans.Error != nil || len(ans.Result) != len(payload256)) {
				err = fmt.Errorf("unexpected answer: id %d, error %v, %d-byte result", ans.ID, ans.Error, len(ans.Result))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	cpu.report(b, len(lat))
	reportPercentiles(b, lat)
}

// BenchmarkOneWay measures one-way envelope throughput on one channel
// (Router.Post of 256-byte notifications until all are acknowledged) next
// to raw length-prefixed messages on a libp2p stream, written one Write per
// message (unbuffered) and through a 64 KiB buffered writer. Reported:
// msgs/s.
//
// codec-floor is no network at all: what every envelope costs before it
// is routed, sent, deduplicated, acknowledged or delivered. One goroutine
// builds envelopes as Node.NewEnvelope does and encodes them into 64 KiB
// batches; a second decodes and checks each, as a receiving node must. It is
// the ceiling of any message path that checks every envelope it receives,
// measured next to the raw figures on the same machine.
func BenchmarkOneWay(b *testing.B) {
	const n = 20000
	b.Run("raw-unbuffered-tcp", func(b *testing.B) { benchRawOneWay(b, n, false) })
	b.Run("raw-buffered-tcp", func(b *testing.B) { benchRawOneWay(b, n, true) })
	b.Run("codec-floor", func(b *testing.B) { benchCodecFloor(b, n) })
	b.Run("nova-post-tcp", func(b *testing.B) { benchNovaOneWay(b, n) })
}

func benchCodecFloor(b *testing.B, n int) {
	f := envelope.NewFactory()
	batches := make(chan []byte, 4)
	decoded := make(chan error, 1)
	go func() {
		var err error
		for buf := range batches {
			for len(buf) > 0 && err == nil {
				_, k, ok := envelope.DecodeCanonicalPrefix(buf)
				if !ok {
					err = fmt.Errorf("an envelope did not decode")
					break
				}
				buf = buf[k:]
			}
		}
		decoded <- err
	}()
	cpu := startCPU()
	start := time.Now()
	for b.Loop() {
		buf := make([]byte, 0, 64<<10)
		for i := 0; i < n; i++ {
			env, err := f.New("a0", "sink", envelope.TypeNotification, payload256)
			if err == nil {
				buf, err = envelope.AppendCBORValidated(buf, env)
			}
			if err != nil {
				b.Fatal(err)
			}
			if len(buf) > 63<<10 {
				batches <- buf
				buf = make([]byte, 0, 64<<10)
			}
		}
		batches <- buf
	}
	close(batches)
	if err := <-decoded; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "msgs/s")
	cpu.report(b, b.N*n)
}

func benchRawOneWay(b *testing.B, n int, buffered bool) {
	const proto = "/bench/sink/1.0.0"
	srv, _ := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(testnet.TCP)...))
	defer srv.Close()
	cli, _ := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(testnet.TCP)...))
	defer cli.Close()
	got := make(chan int, 1)
	srv.SetStreamHandler(proto, func(s network.Stream) {
		fr := frame.NewReader(s, 0)
		w := bufio.NewWriter(s)
		for {
			c := 0
			for c < n {
				if _, err := fr.Next(); err != nil {
					s.Reset()
					return
				}
				c++
			}
			w.Write([]byte{1})
			w.Flush()
		}
	})
	ctx := context.Background()
	cli.Connect(ctx, peer.AddrInfo{ID: srv.ID(), Addrs: srv.Addrs()})
	s, err := cli.NewStream(ctx, srv.ID(), proto)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	_ = got
	msg := frame.Append(nil, payload256)
	var bw *bufio.Writer
	if buffered {
		bw = bufio.NewWriterSize(s, 64<<10)
	}
	one := make([]byte, 1)
	cpu := startCPU()
	start := time.Now()
	rounds := 0
	for b.Loop() {
		for i := 0; i < n; i++ {
			if buffered {
				bw.Write(msg)
			} else if _, err := s.Write(msg); err != nil {
				b.Fatal(err)
			}
		}
		if buffered {
			bw.Flush()
		}
		if _, err := io.ReadFull(s, one); err != nil {
			b.Fatal(err)
		}
		rounds++
	}
	b.ReportMetric(float64(rounds*n)/time.Since(start).Seconds(), "msgs/s")
	cpu.report(b, rounds*n)
}

func benchNovaOneWay(b *testing.B, n int) {
	net := testnet.New(b, 2, testnet.WithTransport(testnet.TCP))
	var got atomic.Int64
	card := node.AgentConfig{Name: "sink", Capabilities: []node.CapabilityConfig{{ID: "sink"}}}.Card()
	net.Nodes[1].RegisterAgent(card, func(context.Context, *envelope.Envelope) (any, error) {
		got.Add(1)
		return nil, nil
	})
	net.Connect(0, 1)
	net.WaitForCards()
	a := net.Nodes[0]
	r := a.Router()
	ctx := context.Background()
	cpu := startCPU()
	start := time.Now()
	rounds := 0
	for b.Loop() {
		base := got.Load()
		for i := 0; i < n; i++ {
			env, _ := a.NewEnvelope("a0", "sink", envelope.TypeNotification, payload256)
			if _, err := r.Post(ctx, env); err != nil {
				b.Fatal(err)
			}
		}
		for got.Load() < base+int64(n) {
			time.Sleep(100 * time.Microsecond)
		}
		for pending(r) > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		rounds++
	}
	b.ReportMetric(float64(rounds*n)/time.Since(start).Seconds(), "msgs/s")
	cpu.report(b, rounds*n)
}

func pending(r interface{ Channels() []protocol.ChannelInfo }) int {
	n := 0
	for _, c := range r.Channels() {
		n += c.Pending
	}
	return n
}

// settleFor is how long a benchmark of requests with gaps waits, once its
// hosts or nodes are connected, before it measures: a node's start-up work
// (its first DHT publish, the roster's first reads, which run 1, 2 and 4 s
// after start) is not what a request costs an agent that talks now and then
// to a node that has been up for a while. The raw hosts wait the same.
const settleFor = 3 * time.Second

// settle waits settleFor when the requests have gaps between them.
func settle(gap time.Duration) {
	if gap > 0 {
		time.Sleep(settleFor) // start-up work has no event to wait on: it is the clock's
	}
}

func benchRaw(b *testing.B, tr testnet.Transport, gap time.Duration) {
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
	settle(gap)
	cpu := startCPU()
	for b.Loop() {
		if gap > 0 {
			time.Sleep(gap)
		}
		t0 := time.Now()
		if _, err := s.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := fr.Next(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	cpu.report(b, len(lat))
	reportPercentiles(b, lat)
}

func benchNova(b *testing.B, tr testnet.Transport, gap time.Duration) {
	net := testnet.New(b, 2, testnet.WithTransport(tr))
	net.Connect(0, 1)
	net.WaitForCards()
	n := net.Nodes[0]
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	settle(gap)
	cpu := startCPU()
	for b.Loop() {
		if gap > 0 {
			time.Sleep(gap)
		}
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
	cpu.report(b, len(lat))
	reportPercentiles(b, lat)
}

// cpuMeter reports the process's CPU time per operation (both nodes live in
// the process): steadier than latency on a noisy machine, and what a
// change in the work per message moves first.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{cputime.Process()} }

func (m cpuMeter) report(b *testing.B, ops int) {
	if ops > 0 {
		b.ReportMetric(float64((cputime.Process()-m.start).Nanoseconds())/1e3/float64(ops), "cpu-µs/op")
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}
