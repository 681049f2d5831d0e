package testnet_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkMCPCall compares, in one run, a tool call through the mesh
// (node A's face -> /nova/mcp/1.0.0 -> node B -> stdio backend) with the
// same call made directly to the backend over stdio and with one round
// trip of a line on a libp2p stream between the two nodes (the goal: the
// mesh call costs at most the direct call plus one round trip), and
// measures concurrent calls through one peer session. The round trip is
// measured twice: back to back, and after the stream sat idle for about
// as long as the backend takes to answer (idleGap), as each leg of a mesh
// call does. Each reports its median (p50-ns) besides its mean (ns/op).
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchtime 2000x -count 5 ./testnet/
func BenchmarkMCPCall(b *testing.B) {
	const idleGap = 250 * time.Microsecond
	args := json.RawMessage(`{"text":"ping"}`)
	b.Run("direct-stdio", func(b *testing.B) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mcptest.EnvServe+"=1")
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(b.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ResetTimer()
		var l latencies
		for b.Loop() {
			l.time(func() {
				if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "say", Arguments: args}); err != nil {
					b.Fatal(err)
				}
			})
		}
		l.report(b)
	})
	net := testnet.New(b, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	face := net.Nodes[0].MCP()
	waitfor.Eventually(b, 15*time.Second, func() error {
		_, err := face.CallTool(b.Context(), "toolsmith.say", args)
		return err
	})
	const proto = "/nova/bench-echo/1.0.0"
	net.Nodes[1].Host().SetStreamHandler(proto, func(s network.Stream) {
		defer s.Close()
		_, _ = io.Copy(s, s)
	})
	defer net.Nodes[1].Host().RemoveStreamHandler(proto)
	s, err := net.Nodes[0].Host().NewStream(b.Context(), net.Nodes[1].Host().ID(), proto)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Reset()
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"toolsmith.say","arguments":{"text":"ping"}}}` + "\n")
	r := bufio.NewReader(s)
	roundTrip := func(b *testing.B) {
		if _, err := s.Write(line); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("stream-rtt", func(b *testing.B) {
		var l latencies
		for b.Loop() {
			l.time(func() { roundTrip(b) })
		}
		l.report(b)
	})
	// Each leg of a mesh call starts on a stream (and Go runtimes) left
	// idle while the backend works, which costs more than a round trip
	// right after the last one: this is the round trip after idleGap, the
	// gap not counted.
	b.Run("stream-rtt-idle", func(b *testing.B) {
		var l latencies
		for range b.N {
			time.Sleep(idleGap)
			l.time(func() { roundTrip(b) })
		}
		var total time.Duration
		for _, d := range l {
			total += d
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
		l.report(b)
	})
	b.Run("mesh", func(b *testing.B) {
		var l latencies
		for b.Loop() {
			l.time(func() {
				if r, err := face.CallTool(b.Context(), "toolsmith.say", args); err != nil || r.IsError {
					b.Fatal(err, r)
				}
			})
		}
		l.report(b)
	})
	b.Run("mesh-parallel", func(b *testing.B) {
		b.SetParallelism(8) // 8 x GOMAXPROCS callers share one peer session
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if r, err := face.CallTool(b.Context(), "toolsmith.say", args); err != nil || r.IsError {
					b.Error(err, r)
					return
				}
			}
		})
	})
}

// latencies holds the duration of each call of a benchmark, whose median
// it reports as p50-ns: on a shared machine a few calls stalled for
// milliseconds move the mean (ns/op) by more than the differences the
// benchmark compares.
type latencies []time.Duration

func (l *latencies) time(f func()) {
	start := time.Now()
	f()
	*l = append(*l, time.Since(start))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(l))
	b.ReportMetric(float64(s[len(s)/2].Nanoseconds()), "p50-ns")
}
