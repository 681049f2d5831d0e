package testnet_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/cputime"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

const benchNodes = 30

// novaSwarm is 30 nodes (star around node 0 plus a ring), node 0 hosting
// the L0 agent "sun", every other node an agent counting deliveries.
func novaSwarm(b testing.TB) (*testnet.Net, *deliveryLog) { return novaSwarmOn(b, testnet.TCP) }

// novaSwarmOn is novaSwarm with its nodes on transport.
func novaSwarmOn(b testing.TB, transport testnet.Transport) (*testnet.Net, *deliveryLog) {
	log := &deliveryLog{at: map[string][]time.Time{}}
	l0 := tiers.L0
	net := testnet.New(b, benchNodes, testnet.WithTransport(transport), testnet.WithConfig(func(i int, c *node.Config) {
		c.MetricsListen = "off"
		if i == 0 {
			c.Agents = []node.AgentConfig{{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "x"}}}}
		} else {
			c.Agents = nil
		}
	}))
	for i, n := range net.Nodes {
		if i > 0 {
			card := node.DefaultAgent(fmt.Sprintf("a%d", i)).Card()
			n.RegisterAgent(card, func(_ context.Context, env *envelope.Envelope) (any, error) {
				log.add(env.ID)
				return nil, nil
			})
		}
	}
	net.Star(0)
	net.Ring()
	net.WaitForCards()
	if !net.Settle(20 * time.Second) {
		b.Log("connections still changing after 20 s: measuring anyway")
	}
	return net, log
}

// deliveryLog records when each message id was delivered, per delivery.
type deliveryLog struct {
	mu sync.Mutex
	at map[string][]time.Time
	n  atomic.Int64
}

func (l *deliveryLog) add(id string) {
	l.mu.Lock()
	l.at[id] = append(l.at[id], time.Now())
	l.mu.Unlock()
	l.n.Add(1)
}

// rawSwarm is the same topology of plain libp2p hosts running default
// GossipSub on one topic: the raw counterpart.
func rawSwarm(b *testing.B) ([]*pubsub.Topic, *deliveryLog) { return rawSwarmOf(b, false) }

// rawQueues are the GossipSub options of the raw counterpart of a burst:
// signed messages checked on receipt (StrictSign) and queues raised as
// nova raises them (protocol.PubSubOptions), and nothing else of nova's.
func rawQueues() []pubsub.Option {
	return []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithPeerOutboundQueueSize(4096),
		pubsub.WithValidateQueueSize(4096),
	}
}

// rawSwarmOf is rawSwarm, with every host connected to every other when
// full: the topology discovery gives nova nodes (each finds all the
// others), so that the comparison is GossipSub with and without nova on
// the same graph.
func rawSwarmOf(b *testing.B, full bool, opts ...pubsub.Option) ([]*pubsub.Topic, *deliveryLog) {
	return rawSwarmWith(b, full, tcpLoopback, nil, opts...)
}

// Listen addresses of raw hosts.
const (
	tcpLoopback  = "/ip4/127.0.0.1/tcp/0"
	quicLoopback = "/ip4/127.0.0.1/udp/0/quic-v1"
)

// rawSwarmWith is rawSwarmOf on hosts listening on listen, built with
// hostOpts besides (libp2p's defaults otherwise: TLS before Noise).
func rawSwarmWith(b *testing.B, full bool, listen string, hostOpts []libp2p.Option, opts ...pubsub.Option) ([]*pubsub.Topic, *deliveryLog) {
	log := &deliveryLog{at: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	var hosts []host.Host
	var topics []*pubsub.Topic
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, h := range hosts {
			h.Close()
		}
	})
	for i := 0; i < benchNodes; i++ {
		h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings(listen)}, hostOpts...)...)
		if err != nil {
			b.Fatal(err)
		}
		hosts = append(hosts, h)
		ps, err := pubsub.NewGossipSub(ctx, h, opts...)
		if err != nil {
			b.Fatal(err)
		}
		t, _ := ps.Join("raw")
		var subOpts []pubsub.SubOpt
		if len(opts) > 0 {
			subOpts = append(subOpts, pubsub.WithBufferSize(4096)) // as nova's subscription
		}
		sub, _ := t.Subscribe(subOpts...)
		topics = append(topics, t)
		if i > 0 {
			wg.Go(func() {
				for {
					m, err := sub.Next(ctx)
					if err != nil {
						return
					}
					log.add(string(m.Data[:32]))
				}
			})
		}
	}
	connect := func(i, j int) {
		hosts[i].Connect(ctx, peer.AddrInfo{ID: hosts[j].ID(), Addrs: hosts[j].Addrs()})
	}
	for i := 1; i < benchNodes; i++ {
		connect(i, 0)
		connect(i, (i+1)%benchNodes)
		for j := i + 2; full && j < benchNodes; j++ {
			connect(i, j)
		}
	}
	waitfor.Eventually(b, 10*time.Second, func() error {
		if n := len(topics[0].ListPeers()); n < benchNodes-1 {
			return fmt.Errorf("%d topic peers", n)
		}
		return nil
	})
	// Warm up until the mesh carries messages to every host (default
	// GossipSub publishes to the mesh only, which forms on heartbeats).
	probe := 0
	waitfor.Eventually(b, 20*time.Second, func() error {
		id := fmt.Sprintf("probe%027d", probe)
		probe++
		topics[0].Publish(ctx, []byte(id))
		time.Sleep(20 * time.Millisecond)
		log.mu.Lock()
		got := len(log.at[id])
		log.mu.Unlock()
		if got < benchNodes-1 {
			return fmt.Errorf("probe reached %d hosts", got)
		}
		return nil
	})
	log.n.Store(0)
	return topics, log
}

// BenchmarkBroadcastBurst publishes 1,000 broadcasts as fast as possible to
// a 30-node swarm and reports the share delivered to the 29 receivers (and
// the time until the last arrived), nova next to plain GossipSub: with its
// default options on the star and ring (gossipsub-raw), and with StrictSign
// and nova's raised queues on the graph nova's discovery makes of it, a full
// mesh (gossipsub-raw-queues, the counterpart to read nova against).
// cpu-ms is the CPU the whole process used meanwhile: on a shared machine it
// moves less with other jobs' load than ms-all does.
func BenchmarkBroadcastBurst(b *testing.B) {
	const burst = 1000
	b.Run("gossipsub-raw", func(b *testing.B) { benchRawBurst(b, burst, false, tcpLoopback, nil) })
	b.Run("gossipsub-raw-queues", func(b *testing.B) { benchRawBurst(b, burst, true, tcpLoopback, nil, rawQueues()...) })
	// The same on nova's security order, Noise before TLS (node.go): what
	// the burst costs on the connections nova makes.
	noiseFirst := []libp2p.Option{libp2p.Security(noise.ID, noise.New), libp2p.Security(libp2ptls.ID, libp2ptls.New)}
	b.Run("gossipsub-raw-queues-noise", func(b *testing.B) { benchRawBurst(b, burst, true, tcpLoopback, noiseFirst, rawQueues()...) })
	b.Run("nova", func(b *testing.B) { benchNovaBurst(b, burst, testnet.TCP) })
	// Both on QUIC, whose TLS 1.3 and AES-GCM nova and raw GossipSub share
	// (libp2p dials QUIC first where a peer offers both): nova's cost over
	// GossipSub's on the same connections.
	b.Run("gossipsub-raw-queues-quic", func(b *testing.B) { benchRawBurst(b, burst, true, quicLoopback, nil, rawQueues()...) })
	b.Run("nova-quic", func(b *testing.B) { benchNovaBurst(b, burst, testnet.QUIC) })
}

// benchNovaBurst is BenchmarkBroadcastBurst on nova nodes on transport.
func benchNovaBurst(b *testing.B, burst int, transport testnet.Transport) {
	net, log := novaSwarmOn(b, transport)
	waitQuiet(b)
	for b.Loop() {
		measureBurst(b, log, burst, func(k int) {
			env, _ := net.Nodes[0].NewEnvelope("sun", envelope.Broadcast, envelope.TypeNotification, k)
			if _, err := net.Nodes[0].Send(context.Background(), env); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchRawBurst is BenchmarkBroadcastBurst on plain GossipSub hosts
// listening on listen, with opts, on nova's full mesh when full.
func benchRawBurst(b *testing.B, burst int, full bool, listen string, hostOpts []libp2p.Option, opts ...pubsub.Option) {
	topics, log := rawSwarmWith(b, full, listen, hostOpts, opts...)
	waitQuiet(b)
	for b.Loop() {
		base := int(log.n.Load())
		measureBurst(b, log, burst, func(k int) {
			// A payload of its own each: GossipSub keeps the slice it is
			// given and sends it after Publish returns, so a payload reused
			// would go out changed after it was signed, and every receiver
			// would reject its signature.
			payload := make([]byte, 256)
			copy(payload, fmt.Sprintf("%032d", k+base))
			topics[0].Publish(context.Background(), payload)
		})
	}
}

// waitQuiet waits until the swarm's start-up work is over: the process
// used under a tenth of a core in each of three consecutive seconds
// (30 idle nova nodes use about a twentieth; their first seconds, a
// routing-table refresh and the roster passes, several times that). A
// burst is measured on a swarm that has been up a while, as an agent
// meets one, not on nodes still filling their tables. It gives up after
// 30 s and says so.
func waitQuiet(b *testing.B) {
	const window, quiet, under = time.Second, 3, 100 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for calm := 0; calm < quiet; {
		if time.Now().After(deadline) {
			b.Log("the swarm was still busy after 30 s: measuring anyway")
			return
		}
		cpu := cputime.Process()
		time.Sleep(window)
		if cputime.Process()-cpu < under {
			calm++
		} else {
			calm = 0
		}
	}
}

// measureBurst publishes burst messages with publish(k), waits until the
// 29 receivers have them all (or 20 s), and reports the burst's wall time
// (ms-all), the process's CPU (cpu-ms), the share delivered, and what the
// burst cost the garbage collector: bytes allocated (MB-alloc) and the
// collector's CPU (gc-cpu-ms). Allocation moves far less with the
// machine's load than time does, so it is the figure to compare builds by
// when a change is about memory.
func measureBurst(b *testing.B, log *deliveryLog, burst int, publish func(k int)) {
	stop := burstProfile(b)
	start, base, cpu := time.Now(), log.n.Load(), cputime.Process()
	alloc0, gc0 := gcFigures()
	for k := 0; k < burst; k++ {
		publish(k)
	}
	waitCount(log, base+int64(burst)*(benchNodes-1), 20*time.Second)
	stop()
	alloc1, gc1 := gcFigures()
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-all")
	b.ReportMetric(float64((cputime.Process() - cpu).Milliseconds()), "cpu-ms")
	b.ReportMetric(100*float64(log.n.Load()-base)/float64(int64(burst)*(benchNodes-1)), "%delivered")
	b.ReportMetric(float64(alloc1-alloc0)/(1<<20), "MB-alloc")
	b.ReportMetric((gc1-gc0)*1000, "gc-cpu-ms")
}

// gcFigures reads the bytes allocated since the process started and the
// CPU seconds the garbage collector has used (an estimate the runtime
// keeps: mark assists, background workers and pauses).
func gcFigures() (allocBytes uint64, gcSeconds float64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Float64()
}

// burstProfile starts a CPU profile of the burst alone, without the
// swarm's set-up, when NOVA_BURST_PROFILE=prefix is set, written to
// prefix-<benchmark>.cpu (read it with `go tool pprof -top -cum`), and
// writes heap profiles at its start and end, prefix-<benchmark>.heap0 and
// .heap1: what the burst allocated is one taken from the other (`go tool
// pprof -sample_index=alloc_space -base X.heap0 X.heap1`). The
// function it returns stops it. Run without -test.cpuprofile then.
func burstProfile(b *testing.B) (stop func()) {
	prefix := os.Getenv("NOVA_BURST_PROFILE")
	if prefix == "" {
		return func() {}
	}
	name := prefix + "-" + strings.ReplaceAll(b.Name(), "/", "-")
	writeHeap := func(path string) {
		// The allocation profile stands as of the last collection: without
		// one here, heap0 would miss what was allocated since (the swarm's
		// start-up, when an idle swarm has not collected for seconds), and
		// the difference would charge it to the burst.
		runtime.GC()
		h, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		if err := pprof.Lookup("allocs").WriteTo(h, 0); err != nil {
			b.Fatal(err)
		}
	}
	writeHeap(name + ".heap0")
	f, err := os.Create(name + ".cpu")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		writeHeap(name + ".heap1")
	}
}

func waitCount(l *deliveryLog, want int64, max time.Duration) {
	deadline := time.Now().Add(max)
	for l.n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkBroadcastLatency sends paced broadcasts (one every 5 ms) and
// reports p50/p99 of the time until all 29 receivers have each one.
func BenchmarkBroadcastLatency(b *testing.B) {
	for _, full := range []bool{false, true} {
		name := "gossipsub-raw"
		if full {
			name += "-fullmesh"
		}
		b.Run(name, func(b *testing.B) { benchRawLatency(b, full) })
	}
	b.Run("nova", func(b *testing.B) {
		net, log := novaSwarm(b)
		var lat []time.Duration
		for b.Loop() {
			env, _ := net.Nodes[0].NewEnvelope("sun", envelope.Broadcast, envelope.TypeNotification, "tick")
			start := time.Now()
			if _, err := net.Nodes[0].Send(context.Background(), env); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, waitAll(log, env.ID, start))
			time.Sleep(5 * time.Millisecond)
		}
		reportLatency(b, lat)
	})
}

// benchRawLatency is BenchmarkBroadcastLatency on plain GossipSub hosts.
func benchRawLatency(b *testing.B, full bool) {
	topics, log := rawSwarmOf(b, full)
	var lat []time.Duration
	k := 0
	for b.Loop() {
		id := fmt.Sprintf("%032d", k)
		k++
		payload := append([]byte(id), make([]byte, 224)...)
		start := time.Now()
		topics[0].Publish(context.Background(), payload)
		lat = append(lat, waitAll(log, id, start))
		time.Sleep(5 * time.Millisecond)
	}
	reportLatency(b, lat)
}

func waitAll(l *deliveryLog, id string, start time.Time) time.Duration {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		ts := l.at[id]
		if len(ts) >= benchNodes-1 {
			last := slices.MaxFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			l.mu.Unlock()
			return last.Sub(start)
		}
		l.mu.Unlock()
		time.Sleep(50 * time.Microsecond)
	}
	return 5 * time.Second
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkIdleNodeMemory starts 100 nodes on loopback, connected in a
// ring, and reports the Go heap in use per node once they are idle.
func BenchmarkIdleNodeMemory(b *testing.B) {
	const n = 100
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		net := testnet.New(b, n, testnet.WithTransport(testnet.TCP), testnet.WithoutLeakCheck(b), testnet.WithConfig(func(i int, c *node.Config) {
			c.MetricsListen = "off"
		}))
		net.Ring()
		net.WaitForCards()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n/1024, "KiB-heap/node")
		b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/node")
		for _, nd := range net.Nodes {
			nd.Close()
		}
	}
}

var _ = protocol.PathBroadcast
