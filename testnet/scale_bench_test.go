package testnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/cputime"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkScale200 starts 200 real nodes in this process (on loopback,
// QUIC above 100 nodes and TCP up to it, see scaleTransport; NOVA_SCALE_N
// changes the count) in a realistic topology: each
// node knows only one of ten bootstrap nodes, and discovery and the
// connection manager (48-72 peers per node) do the rest, as for a swarm
// that grew from invites. It reports, once (use -benchtime 1x):
//
//   - join-s: until every node has joined (in waves of ten, each once the
//     swarm settled from the last);
//   - findable-s: from then until every node finds three agents of other
//     nodes, picked at random, by name;
//   - listed-s: from the join until every node's registry lists agents of
//     every other node (the roster's work, measured beside the rest);
//   - lookup-p50-ms, lookup-p99-ms: name lookups of random agents from
//     random nodes after that;
//   - bcast-p50-ms, bcast-p99-ms: a broadcast until every other node
//     delivered it (20 broadcasts, 200 ms apart);
//   - doc-s: a document written on one node until every node holds the value;
//   - heap-MiB/node, goroutines/node, conns/node: once idle;
//   - dht-req/node/min: DHT requests served (every Kademlia message, as
//     kad-dht's request hook counts them) per node per minute, over the
//     whole run and (idle-) over an idle window of NOVA_SCALE_IDLE (3
//     minutes, one refresh interval, by default) at the end;
//   - idle-cpu-ms/s/node: the process's CPU time over that idle window,
//     per node per second (NOVA_SCALE_CPUPROFILE=file profiles the window).
//
// NOVA_SCALE_ROSTER=dht turns discovery's roster gossip off, so that the
// roster and the refresh read every member's records from the DHT: the
// cost the gossip removes, measured in the same build.
//
// It takes several minutes on 2 cores and is never part of a plain test
// run (benchmarks are not). NOVA_SCALE_DIAG=1 prints, every 5 s, the
// process's CPU time, descriptors, goroutines and connections, and every
// failed dial to a bootstrap node: what to look at when a run stalls.
func BenchmarkScale200(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("NOVA_SCALE_N")); err == nil && v >= 4 {
		n = v
	}
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		goBefore := runtime.NumGoroutine()
		var dhtReqs atomic.Int64
		net := testnet.New(b, n, testnet.WithTransport(scaleTransport(n)), testnet.WithoutLeakCheck(b),
			testnet.WithConfig(func(i int, c *node.Config) {
				c.DiscoveryOptions = append(c.DiscoveryOptions, discovery.WithDHTOptions(
					dht.OnRequestHook(func(context.Context, network.Stream, *pb.Message) { dhtReqs.Add(1) })))
				if os.Getenv("NOVA_SCALE_ROSTER") == "dht" {
					c.DiscoveryOptions = append(c.DiscoveryOptions, discovery.WithGossip(nil))
				}
				c.MetricsListen = "off"
				// A laptop's share of the swarm: 96 inbound connections,
				// so the connection manager keeps each node at 48-72 peers
				// (node/limits.go watermarks), not the full mesh that 200
				// nodes in one process could not hold (two descriptors
				// per connection, 20,000 per process here).
				c.Admission = node.Admission{InboundConns: 96}
			}))
		started := time.Now()
		ctx := context.Background()
		stopDiag := scaleDiagnostics(net)
		defer stopDiag()
		// Each node dials its bootstrap node once, as `run` does. The
		// nodes join in waves of ten, each wave once the swarm has settled
		// from the last (its connections stopped changing): 200 nodes
		// joining at once on 2 cores queue each handshake behind every
		// other node's DHT walk, past libp2p's 5 s dial timeout for
		// loopback and LAN addresses, and the bootstrap nodes' listeners
		// (16 handshakes in flight each) stop accepting. On a loaded
		// machine a handshake can still take seconds, so with patience.
		connect := func(i, j int) {
			addr := net.Nodes[j].Addrs()[0].String() + "/p2p/" + net.Nodes[j].Host().ID().String()
			var err error
			for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); {
				if net.Nodes[i].Host().Network().Connectedness(net.Nodes[j].ID()) == network.Connected {
					return
				}
				if sw, ok := net.Nodes[i].Host().Network().(*swarm.Swarm); ok {
					sw.Backoff().Clear(net.Nodes[j].Host().ID())
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err = net.Nodes[i].Connect(cctx, addr)
				cancel()
				if err == nil {
					return
				}
				if os.Getenv("NOVA_SCALE_DIAG") != "" {
					fmt.Fprintf(os.Stderr, "scale: node %d -> bootstrap %d: %v\n", i, j, err)
				}
				time.Sleep(time.Second) // a retry, not a wait for an event
			}
			b.Errorf("node %d cannot connect to its bootstrap node %d: %v", i, j, err)
		}
		const boot, wave = 10, 10
		for i := 1; i < min(boot, n); i++ {
			connect(i, 0)
		}
		net.Settle(10 * time.Second)
		for first := boot; first < n; first += wave {
			var wg sync.WaitGroup
			for i := first; i < min(first+wave, n); i++ {
				wg.Go(func() { connect(i, i%boot) })
			}
			wg.Wait()
			net.Settle(10 * time.Second)
		}
		if b.Failed() {
			b.FailNow()
		}
		joined := time.Since(started)
		// Meanwhile: until every node's registry lists every other
		// node's agent (the roster's work; lookups add a few).
		listed := make(chan time.Duration, 1)
		stopListed := make(chan struct{})
		var listWG sync.WaitGroup
		listWG.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				all := true
				for _, nd := range net.Nodes {
					hosts := map[string]bool{}
					for _, c := range nd.Registry().Remote() {
						hosts[c.Host] = true
					}
					if len(hosts) < n-1 {
						all = false
						break
					}
				}
				if all {
					listed <- time.Since(started) - joined
					return
				}
				select {
				case <-stopListed:
					return
				case <-t.C:
				}
			}
		})
		rng := rand.New(rand.NewPCG(1, 2))
		name := func(i int) string { return fmt.Sprintf("a%d", i) }

		// Every node finds three random agents of others by name.
		type want struct{ from, agent int }
		var pending []want
		for i := range n {
			for range 3 {
				j := rng.IntN(n - 1)
				if j >= i {
					j++
				}
				pending = append(pending, want{i, j})
			}
		}
		deadline := time.Now().Add(10 * time.Minute)
		for len(pending) > 0 && time.Now().Before(deadline) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var left []want
			sem := make(chan struct{}, 16)
			for _, w := range pending {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					if _, err := net.Nodes[w.from].FindAgents(ctx, name(w.agent), "", "", ""); err != nil {
						mu.Lock()
						left = append(left, w)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			pending = left
		}
		if len(pending) > 0 {
			// What the failing nodes know of the agents they cannot find.
			missing := map[int]int{}
			for _, w := range pending {
				missing[w.agent]++
			}
			for k, w := range pending[:min(5, len(pending))] {
				from, to := net.Nodes[w.from], net.Nodes[w.agent]
				hosts := map[string]bool{}
				for _, c := range from.Registry().Remote() {
					hosts[c.Host] = true
				}
				fs, ts := from.DiscoveryStats(), to.DiscoveryStats()
				unidentified := 0 // connected peers whose protocols identify never told
				for _, p := range from.Host().Network().Peers() {
					if ps, _ := from.Host().Peerstore().GetProtocols(p); len(ps) == 0 {
						unidentified++
					}
				}
				b.Logf("failing %d: a%d from node %d: its registry lists %d hosts (a%d's: %v), connected %v; node %d has %d connections (%d unidentified), %d peers in its routing table, took %d roster messages (%d from snapshots), node %d sent %d, publish failures %d; a%d is missed by %d nodes",
					k, w.agent, w.from, len(hosts), w.agent, hosts[to.ID().String()], from.Host().Network().Connectedness(to.ID()) == network.Connected,
					w.from, len(from.Host().Network().Peers()), unidentified, fs.RoutingTable, fs.GossipTaken, fs.RosterAsked, w.agent, ts.GossipSent, ts.PublishFailures, w.agent, missing[w.agent])
			}
			b.Fatalf("%d of %d lookups still fail after 10 minutes, of %d agents, e.g. a%d from node %d", len(pending), 3*n, len(missing), pending[0].agent, pending[0].from)
		}
		b.ReportMetric(joined.Seconds(), "join-s")
		b.ReportMetric(time.Since(started).Seconds()-joined.Seconds(), "findable-s")

		// Lookup latency of random agents from random nodes.
		var lookups []time.Duration
		for range 200 {
			i, j := rng.IntN(n), rng.IntN(n)
			start := time.Now()
			if _, err := net.Nodes[i].FindAgents(ctx, name(j), "", "", ""); err != nil {
				b.Fatalf("lookup of a%d from node %d: %v", j, i, err)
			}
			lookups = append(lookups, time.Since(start))
		}
		reportPercentiles(b, lookups, "lookup")

		// Broadcasts from node 0 until every other node delivered each.
		got := make(map[string]map[int]time.Time)
		var mu sync.Mutex
		var subs []*node.Subscription
		for i := 1; i < n; i++ {
			sub := net.Nodes[i].Observer().Subscribe(1024, protocol.EvtMessageReceived)
			subs = append(subs, sub)
			go func() { // ends when sub closes
				for e := range sub.C {
					if e.Path != protocol.PathBroadcast {
						continue
					}
					mu.Lock()
					if got[e.EnvelopeID] == nil {
						got[e.EnvelopeID] = map[int]time.Time{}
					}
					got[e.EnvelopeID][i] = time.Now()
					mu.Unlock()
				}
			}()
		}
		var bcasts []time.Duration
		for k := range 20 {
			env, _ := net.Nodes[0].NewEnvelope("a0", envelope.Broadcast, envelope.TypeNotification, k)
			start := time.Now()
			if _, err := net.Nodes[0].Send(ctx, env); err != nil {
				b.Fatal(err)
			}
			end := time.Now().Add(30 * time.Second)
			for time.Now().Before(end) {
				mu.Lock()
				c := len(got[env.ID])
				var last time.Time
				if c == n-1 {
					for _, t := range got[env.ID] {
						if t.After(last) {
							last = t
						}
					}
				}
				mu.Unlock()
				if c == n-1 {
					bcasts = append(bcasts, last.Sub(start))
					break
				}
				time.Sleep(time.Millisecond)
			}
			if len(bcasts) != k+1 {
				mu.Lock()
				c := len(got[env.ID])
				mu.Unlock()
				b.Fatalf("broadcast %d reached %d of %d nodes in 30 s", k, c, n-1)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, s := range subs {
			s.Close()
		}
		reportPercentiles(b, bcasts, "bcast")

		// A document: every node opens it, node 0 writes, until all hold it.
		for _, nd := range net.Nodes {
			if _, err := nd.ReadDoc(ctx, "scale", ""); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if _, err := net.Nodes[0].ApplyDocOp(ctx, "scale", localapi.DocOp{Op: "set", Path: "/k", Value: json.RawMessage(`"v"`)}); err != nil {
			b.Fatal(err)
		}
		left := slices.Collect(func(yield func(int) bool) {
			for i := 1; i < n; i++ {
				if !yield(i) {
					return
				}
			}
		})
		for len(left) > 0 && time.Since(start) < 2*time.Minute {
			left = slices.DeleteFunc(left, func(i int) bool {
				v, err := net.Nodes[i].ReadDoc(ctx, "scale", "/k")
				return err == nil && string(v.Value) == `"v"`
			})
			time.Sleep(10 * time.Millisecond)
		}
		if len(left) > 0 {
			b.Fatalf("%d nodes lack the document's value after 2 minutes", len(left))
		}
		b.ReportMetric(time.Since(start).Seconds(), "doc-s")

		// The listing may end after the rest: wait for it, up to the
		// republish interval (a member's next heartbeat) after the joins.
		d, ok := time.Duration(0), false
		select {
		case d, ok = <-listed: // done already, while a late phase ran
		default:
			select {
			case d, ok = <-listed:
			case <-time.After(time.Until(started.Add(joined + discovery.DefaultRepublishInterval))):
			}
		}
		if ok {
			b.ReportMetric(d.Seconds(), "listed-s")
		} else {
			b.Logf("some node still does not list agents of every other node %v after the joins (listed-s not reported)", discovery.DefaultRepublishInterval)
			logUnlisted(b, net.Nodes)
		}
		close(stopListed)
		listWG.Wait()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		conns := 0
		for _, nd := range net.Nodes {
			conns += len(nd.Host().Network().Conns())
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(n)/(1<<20), "heap-MiB/node")
		b.ReportMetric(float64(runtime.NumGoroutine()-goBefore)/float64(n), "goroutines/node")
		b.ReportMetric(float64(conns)/float64(n), "conns/node")
		perNodeMin := func(reqs int64, d time.Duration) float64 { return float64(reqs) / float64(n) / d.Minutes() }
		b.ReportMetric(perNodeMin(dhtReqs.Load(), time.Since(started)), "dht-req/node/min")
		idle := 3 * time.Minute
		if d, err := time.ParseDuration(os.Getenv("NOVA_SCALE_IDLE")); err == nil {
			idle = d
		}
		if idle > 0 {
			r0, cpu0 := dhtReqs.Load(), cputime.Process()
			stopProfile := scaleCPUProfile(b)
			time.Sleep(idle) // a rate over time is what is measured
			stopProfile()
			b.ReportMetric(perNodeMin(dhtReqs.Load()-r0, idle), "idle-dht-req/node/min")
			cpu := cputime.Process() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n)/idle.Seconds(), "idle-cpu-ms/s/node")
		}
		for _, nd := range net.Nodes {
			nd.Close()
		}
	}
}

// logUnlisted logs, for the first nodes whose registry lacks another
// node's agents, which hosts they lack, and what the roster brought them:
// where to look when listed-s is not reported.
func logUnlisted(b *testing.B, nodes []*node.Node) {
	shown := 0
	for i, nd := range nodes {
		hosts := map[string]bool{}
		for _, c := range nd.Registry().Remote() {
			hosts[c.Host] = true
		}
		var lacks []int
		for j, other := range nodes {
			if j != i && !hosts[other.ID().String()] {
				lacks = append(lacks, j)
			}
		}
		if len(lacks) == 0 {
			continue
		}
		st := nd.DiscoveryStats()
		first := nodes[lacks[0]]
		fst := first.DiscoveryStats()
		b.Logf("node %d lacks the agents of %d nodes (first %v); took %d roster messages (%d from snapshots), ignored %d, refused %d; connected to %d peers, %d in its routing table; node %d sent %d roster messages, has %d connections, connected to node %d: %v",
			i, len(lacks), lacks[:min(5, len(lacks))], st.GossipTaken, st.RosterAsked, st.GossipIgnored, st.GossipRefused, len(nd.Host().Network().Peers()), st.RoutingTable,
			lacks[0], fst.GossipSent, len(first.Host().Network().Peers()), i, nd.Host().Network().Connectedness(first.ID()) == network.Connected)
		if shown++; shown == 5 {
			return
		}
	}
}

// scaleTransport is the transport of the swarm: NOVA_SCALE_TRANSPORT (tcp
// or quic), else TCP up to 100 nodes and QUIC above. Each TCP connection
// takes a descriptor on each of its ends, all in this process: 200 nodes
// at 80-90 connections each (the connection manager cannot trim below
// the peers kad-dht and GossipSub protect) need about 18,000, near the
// runner's limit of 20,000, where a real node in its own process needs 90.
// A QUIC node's connections share its one UDP socket.
func scaleTransport(n int) testnet.Transport {
	switch os.Getenv("NOVA_SCALE_TRANSPORT") {
	case "tcp":
		return testnet.TCP
	case "quic":
		return testnet.QUIC
	}
	if n > 100 {
		return testnet.QUIC
	}
	return testnet.TCP
}

// scaleCPUProfile starts a CPU profile of the idle window when
// NOVA_SCALE_CPUPROFILE names a file, and returns what stops it.
func scaleCPUProfile(b *testing.B) (stop func()) {
	path := os.Getenv("NOVA_SCALE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// reportPercentiles reports the p50 and p99 of ds in milliseconds.
func reportPercentiles(b *testing.B, ds []time.Duration, what string) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[len(ds)/2]), what+"-p50-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), what+"-p99-ms")
}

// scaleDiagnostics prints, every 5 s while NOVA_SCALE_DIAG is set, what the
// process holds and uses: CPU time so far, file descriptors, goroutines, connections in all and on
// the busiest node, and the bootstrap nodes' inbound connections as their
// resource managers count them. It returns the function that stops it.
func scaleDiagnostics(net *testnet.Net) func() {
	if os.Getenv("NOVA_SCALE_DIAG") == "" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			fds, _ := os.ReadDir("/proc/self/fd")
			total, most := 0, 0
			for _, nd := range net.Nodes {
				c := len(nd.Host().Network().Conns())
				total += c
				most = max(most, c)
			}
			var boot []string
			for _, nd := range net.Nodes[:min(3, len(net.Nodes))] {
				_ = nd.Host().Network().ResourceManager().ViewSystem(func(s network.ResourceScope) error {
					st := s.Stat()
					boot = append(boot, fmt.Sprintf("%d/%d/%dMiB", st.NumConnsInbound, st.NumConnsOutbound, st.Memory>>20))
					return nil
				})
			}
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			fmt.Fprintf(os.Stderr, "scale: %4.0fs cpu=%.0fs fds=%d goroutines=%d conns=%d (%.1f/node, max %d) boot in/out/mem=%v\n",
				time.Since(start).Seconds(), cpu.Seconds(), len(fds), runtime.NumGoroutine(), total, float64(total)/float64(len(net.Nodes)), most, boot)
		}
	})
	return func() { close(done); wg.Wait() }
}
