package testnet_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/cputime"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkIdlePerPeer measures what an idle connection costs a node:
// goroutines and heap per connected peer, once the peers have greeted
// each other and gone quiet. Sub-benchmarks, in the same run:
//
//   - nova: nova nodes (TCP on loopback), in a star around node 0, after
//     the cards are exchanged and discovery has settled;
//   - raw: plain libp2p hosts with the same transports and security
//     (Noise first), resource and connection managers, a Kademlia DHT in server mode and GossipSub
//     (StrictSign) subscribed to one topic, in the same star.
//
// Each reports goroutines/peer and bytes/peer: the growth of the process's
// goroutines and live heap from the unconnected nodes to the idle star,
// divided by the connected peers summed over all nodes (a connection
// counts on both of its ends). NOVA_IDLE_PEERS sets the number of nodes
// (default 16); NOVA_IDLE_PROFILE=prefix prints the goroutines that
// appeared, grouped by function, nova's first, and writes heap profiles
// before and after to prefix-<benchmark>-{before,after}.heap.
func BenchmarkIdlePerPeer(b *testing.B) {
	if os.Getenv("NOVA_IDLE_PROFILE") != "" {
		runtime.MemProfileRate = 4 << 10 // precise enough to attribute a few KiB per peer
	}
	n := 16
	if v, err := strconv.Atoi(os.Getenv("NOVA_IDLE_PEERS")); err == nil && v >= 2 {
		n = v
	}
	b.Run("nova", func(b *testing.B) {
		for b.Loop() {
			net := testnet.New(b, n, testnet.WithTransport(testnet.TCP), testnet.WithoutLeakCheck(b),
				testnet.WithConfig(func(i int, c *node.Config) { c.MetricsListen = "off" }))
			peers := func() int {
				c := 0
				for _, nd := range net.Nodes {
					c += len(nd.Host().Network().Peers())
				}
				return c
			}
			measureIdle(b, peers, func() {
				net.Star(0)
				net.WaitForCards()
				net.Settle(30 * time.Second)
			})
			for _, nd := range net.Nodes {
				nd.Close()
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			hosts := make([]host.Host, n)
			for i := range hosts {
				hosts[i] = rawIdleHost(b)
			}
			peers := func() int {
				c := 0
				for _, h := range hosts {
					c += len(h.Network().Peers())
				}
				return c
			}
			measureIdle(b, peers, func() {
				ctx := context.Background()
				for _, h := range hosts[1:] {
					if err := h.Connect(ctx, peer.AddrInfo{ID: hosts[0].ID(), Addrs: hosts[0].Addrs()}); err != nil {
						b.Fatal(err)
					}
				}
				settle(peers)
			})
			for _, h := range hosts {
				h.Close()
			}
		}
	})
}

// measureIdle reports the goroutines and live heap that connect (which
// connects the nodes and waits for them to go idle) adds, per connected
// peer as peers counts them.
func measureIdle(b *testing.B, peers func() int, connect func()) {
	b.Helper()
	profile := os.Getenv("NOVA_IDLE_PROFILE")
	g0, h0, prof0 := idleSnapshot()
	if profile != "" {
		writeHeapProfile(b, profile+"-"+strings.ReplaceAll(b.Name(), "/", "-")+"-before.heap")
	}
	connect()
	time.Sleep(2 * time.Second) // idle: what is left running when nothing happens
	g1, h1, prof1 := idleSnapshot()
	p := peers()
	if p == 0 {
		b.Fatal("no connected peers")
	}
	b.ReportMetric(float64(g1-g0)/float64(p), "goroutines/peer")
	b.ReportMetric(float64(int64(h1)-int64(h0))/float64(p), "bytes/peer")
	b.ReportMetric(float64(p), "peers")
	if profile != "" {
		writeHeapProfile(b, profile+"-"+strings.ReplaceAll(b.Name(), "/", "-")+"-after.heap")
		fmt.Fprintf(os.Stderr, "%s: goroutines that appeared (%d connected peers), grouped by function:\n%s", b.Name(), p, goroutineGrowth(prof0, prof1, 40))
	}
}

// writeHeapProfile writes the heap profile (as of the last GC) to path;
// compare two with `go tool pprof -base before.heap after.heap`.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// idleSnapshot is the process's goroutine count, live heap after a GC,
// and goroutine profile grouped by stack (runtime/pprof debug=1).
func idleSnapshot() (int, uint64, []byte) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return runtime.NumGoroutine(), m.HeapAlloc, buf.Bytes()
}

// settle waits until count stays the same for a second (at most 30 s).
func settle(count func() int) {
	last, stable := count(), 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && stable < 4; {
		time.Sleep(250 * time.Millisecond)
		if c := count(); c == last {
			stable++
		} else {
			last, stable = c, 0
		}
	}
}

// BenchmarkIdleNodeCPU reports the CPU two connected, idle nodes use per
// second (after a warm-up and a burst of requests, so channels, workers
// and timers exist), in the same process as its counterparts:
//
//   - libp2p-hosts: two bare libp2p hosts, default options;
//   - libp2p-dht-gossipsub: two libp2p hosts as a nova node builds them,
//     with a DHT server and GossipSub subscribed to one topic
//     ([rawIdleHost]), which is the share of an idle node's CPU that is
//     libp2p's own (GossipSub's heartbeat, the DHT's and connection
//     manager's timers);
//   - nova-nodes: two nova nodes.
//
// An idle node on a laptop should let the CPU sleep. Use -benchtime 1x;
// NOVA_IDLE_SECONDS sets the measured window (default 5).
func BenchmarkIdleNodeCPU(b *testing.B) {
	idle := 5 * time.Second
	if s, err := strconv.Atoi(os.Getenv("NOVA_IDLE_SECONDS")); err == nil && s > 0 {
		idle = time.Duration(s) * time.Second
	}
	measure := func(b *testing.B) {
		time.Sleep(time.Second) // let the connection's first exchanges end
		c0 := cputime.Process()
		time.Sleep(idle) // the window measured: nothing to wait for but the clock
		b.ReportMetric(float64(cputime.Process()-c0)/float64(time.Millisecond)/idle.Seconds(), "cpu-ms/s")
	}
	b.Run("libp2p-hosts", func(b *testing.B) {
		for b.Loop() {
			h1, _ := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(testnet.TCP)...))
			h2, _ := libp2p.New(libp2p.ListenAddrStrings(testnet.ListenAddrs(testnet.TCP)...))
			if err := h1.Connect(context.Background(), peer.AddrInfo{ID: h2.ID(), Addrs: h2.Addrs()}); err != nil {
				b.Fatal(err)
			}
			measure(b)
			h1.Close()
			h2.Close()
		}
	})
	b.Run("libp2p-dht-gossipsub", func(b *testing.B) {
		for b.Loop() {
			h1, h2 := rawIdleHost(b), rawIdleHost(b)
			if err := h1.Connect(context.Background(), peer.AddrInfo{ID: h2.ID(), Addrs: h2.Addrs()}); err != nil {
				b.Fatal(err)
			}
			measure(b)
			h1.Close()
			h2.Close()
		}
	})
	b.Run("nova-nodes", func(b *testing.B) {
		for b.Loop() {
			net := testnet.New(b, 2, testnet.WithTransport(testnet.TCP))
			net.Connect(0, 1)
			net.WaitForCards()
			for range 1000 {
				env, _ := net.Nodes[0].NewEnvelope("a0", "a1", envelope.TypeRequest, "x")
				if _, _, err := net.Nodes[0].Request(context.Background(), env); err != nil {
					b.Fatal(err)
				}
			}
			measure(b)
			for _, nd := range net.Nodes {
				nd.Close()
			}
		}
	})
}

// rawIdleHost is a libp2p host as a nova node builds one, without nova:
// default transports, resource manager and a connection manager, a DHT
// server and GossipSub subscribed to one topic, listening on loopback TCP.
func rawIdleHost(b *testing.B) host.Host {
	b.Helper()
	cm, err := connmgr.NewConnManager(100, 150)
	if err != nil {
		b.Fatal(err)
	}
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.ConnectionManager(cm),
		libp2p.Security(noise.ID, noise.New), libp2p.Security(libp2ptls.ID, libp2ptls.New), // nova's order
		libp2p.EnableRelay(), libp2p.EnableHolePunching(), libp2p.EnableAutoNATv2())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix("/rawidle"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign))
	if err != nil {
		b.Fatal(err)
	}
	t, err := ps.Join("idle")
	if err != nil {
		b.Fatal(err)
	}
	sub, err := t.Subscribe()
	if err != nil {
		b.Fatal(err)
	}
	go func() { // ends when the host's pubsub context ends
		for {
			if _, err := sub.Next(ctx); err != nil {
				return
			}
		}
	}()
	return h
}

// goroutineGrowth lists the goroutine groups (debug=1 profiles, one group
// per stack) whose count grew from before to after, most first, those
// running this module's code first; each line names the group's first
// frame of this module (or its top frame) and its bottom frame.
func goroutineGrowth(before, after []byte, limit int) string {
	b, a := goroutineGroups(before), goroutineGroups(after)
	type row struct {
		key  string
		nova bool
		d    int
	}
	merged := map[string]*row{}
	for k, c := range a {
		if d := c - b[k]; d != 0 {
			label := stackLabel(k)
			r := merged[label]
			if r == nil {
				r = &row{key: label, nova: strings.Contains(k, "nova-node/nova-node")}
				merged[label] = r
			}
			r.d += d
		}
	}
	var rows []*row
	for _, r := range merged {
		if r.d != 0 {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(x, y *row) int {
		if x.nova != y.nova {
			if x.nova {
				return -1
			}
			return 1
		}
		return cmp.Or(y.d-x.d, strings.Compare(x.key, y.key))
	})
	var out strings.Builder
	for i, r := range rows {
		if i == limit {
			fmt.Fprintf(&out, "  … %d more groups\n", len(rows)-limit)
			break
		}
		fmt.Fprintf(&out, "  %+5d %s\n", r.d, r.key)
	}
	return out.String()
}

// goroutineGroups parses a debug=1 goroutine profile into counts per
// stack (the stack's function names, one per line).
func goroutineGroups(p []byte) map[string]int {
	groups := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	count := 0
	var stack []string
	flush := func() {
		if count > 0 {
			groups[strings.Join(stack, "\n")] += count
		}
		count, stack = 0, nil
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, " @ 0x"):
			flush()
			count, _ = strconv.Atoi(strings.Fields(line)[0])
		case strings.HasPrefix(line, "#\t0x"):
			f := strings.Fields(line)
			if len(f) >= 3 {
				fn := f[2]
				if i := strings.LastIndex(fn, "+0x"); i > 0 {
					fn = fn[:i]
				}
				stack = append(stack, fn)
			}
		}
	}
	flush()
	return groups
}

// stackLabel names a stack by its first frame of this module (else its
// first frame outside the runtime and sync packages) and its bottom frame.
func stackLabel(stack string) string {
	frames := strings.Split(stack, "\n")
	top := frames[0]
	for _, f := range frames {
		if strings.Contains(f, "nova-node/nova-node") {
			top = f
			break
		}
	}
	if top == frames[0] {
		for _, f := range frames {
			if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "sync.") && !strings.HasPrefix(f, "internal/") && !strings.HasPrefix(f, "time.") {
				top = f
				break
			}
		}
	}
	short := func(s string) string { return strings.TrimPrefix(s, "github.com/") }
	return short(top) + "  <- " + short(frames[len(frames)-1])
}
