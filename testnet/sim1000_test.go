//go:build sim

package testnet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p"
	kb "github.com/libp2p/go-libp2p-kbucket"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/connhealth"
	nproto "github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

// The simulated swarm: every node is discovery (the Kademlia DHT under
// /nova, name lookups, roster, refresh), the router (broadcasts over the
// one GossipSub) and GossipSub, the production packages wired as node/
// wires them, on a libp2p host whose only transport is QUIC over
// go-libp2p's simulated network (x/simlibp2p, marcopolo/simnet), inside a
// testing/synctest bubble: time is simulated, so minutes of churn run in
// the seconds the CPU needs. See docs/simulation.md.

const simSwarm = "sim"

// simParams are the run's knobs, read from the environment.
type simParams struct {
	n       int // nodes online at any time
	minutes int // simulated minutes of churn
	churn   int // percent of the nodes replaced each minute
	// spread is the part of each minute over which the churn is spread,
	// one node out and one in at a time, evenly; zero replaces them all
	// at once.
	spread   time.Duration
	lookups  int // name lookups per minute
	bcasts   int // broadcasts per minute
	warmup   time.Duration
	seed     uint64
	parallel int // lookups in flight at once
	// connLow and connHigh are the connection manager's watermarks: a
	// node sets them to half and three quarters of libp2p's scaled
	// inbound-connection limit, 64 plus 64 per GiB of an eighth of the
	// machine's memory: 32 and 48 up to 1 GiB of memory, 64 and 96 at 8
	// GiB, about 100 and 150 at 16 GiB.
	connLow, connHigh int
	// grace is how long a new connection is safe from trimming (a node's
	// is 10 s).
	grace time.Duration
	// wave is how many nodes start at once while the swarm forms, and
	// waveGap the time between two waves: waves closer than the grace
	// period plus the connection manager's 10 s between trims let every
	// node connect to every other before any connection may be trimmed.
	wave    int
	waveGap time.Duration
	// trace logs, for every lookup that fails, where the looked-up
	// agent's name provider record is (NOVA_SIM_TRACE=1).
	trace bool
	// dhtRoster turns discovery's roster gossip off, as a node built
	// without it reads every member's records from the DHT
	// (NOVA_SIM_ROSTER=dht).
	dhtRoster bool
	// resend makes a newcomer send its roster message three times, as a
	// node that does not know its roster topic's peers does
	// (NOVA_SIM_ROSTER=resend; see discovery.WithGossipPeers).
	resend bool
	// keepPeers leaves every peer a node met in its peerstore, as libp2p
	// does on its own (NOVA_SIM_PEERSTORE=keep; see connhealth.ForgetPeers).
	keepPeers bool
}

// wallClock is the machine's monotonic clock in nanoseconds: inside a
// synctest bubble time.Now is simulated, and the run's cost in real time
// is read here.
func wallClock() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envIntOrZero is envInt for a knob that may be zero.
func envIntOrZero(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func readSimParams() simParams {
	return simParams{
		n:        envInt("NOVA_SIM_N", 1000),
		minutes:  envInt("NOVA_SIM_MINUTES", 5),
		churn:    envInt("NOVA_SIM_CHURN_PCT", 10),
		spread:   time.Duration(envIntOrZero("NOVA_SIM_CHURN_SPREAD_S", 30)) * time.Second,
		lookups:  envInt("NOVA_SIM_LOOKUPS", 200),
		bcasts:   envInt("NOVA_SIM_BROADCASTS", 3),
		warmup:   time.Duration(envInt("NOVA_SIM_WARMUP_S", 120)) * time.Second,
		seed:     uint64(envInt("NOVA_SIM_SEED", 1)),
		parallel: envInt("NOVA_SIM_PARALLEL", 20),
		connLow:  envInt("NOVA_SIM_CONN_LOW", 100),
		connHigh: envInt("NOVA_SIM_CONN_HIGH", 150),
		grace:    time.Duration(envInt("NOVA_SIM_GRACE_S", 10)) * time.Second,
		wave:     envInt("NOVA_SIM_WAVE", 50),
		waveGap:  time.Duration(envInt("NOVA_SIM_WAVE_GAP_S", 1)) * time.Second,
		trace:    os.Getenv("NOVA_SIM_TRACE") == "1",

		dhtRoster: os.Getenv("NOVA_SIM_ROSTER") == "dht",
		resend:    os.Getenv("NOVA_SIM_ROSTER") == "resend",
		keepPeers: os.Getenv("NOVA_SIM_PEERSTORE") == "keep",
	}
}

// dhtCounter counts the DHT requests a node sends: every message written
// on an outbound stream of nova's DHT protocol is one request (kad-dht
// writes each message with one Write).
type dhtCounter struct {
	host.Host
	sent atomic.Int64

	// With NOVA_SIM_TRACE: the ADD_PROVIDER requests this node sent for
	// the name key of its own agent (multihash nameMH), and when the
	// first went out.
	nameMH        []byte
	nameProvides  atomic.Int64
	firstProvided atomic.Pointer[time.Time]
}

func isDHT(pids []protocol.ID) bool {
	for _, p := range pids {
		if strings.HasPrefix(string(p), "/nova/") && strings.HasSuffix(string(p), "/kad/1.0.0") {
			return true
		}
	}
	return false
}

func (c *dhtCounter) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := c.Host.NewStream(ctx, p, pids...)
	if err != nil || !isDHT(pids) {
		return s, err
	}
	return &countedStream{Stream: s, c: c}, nil
}

type countedStream struct {
	network.Stream
	c *dhtCounter
}

func (s *countedStream) Write(b []byte) (int, error) {
	s.c.sent.Add(1)
	if s.c.nameMH != nil && isAddProvider(b, s.c.nameMH) {
		if s.c.nameProvides.Add(1) == 1 {
			now := time.Now()
			s.c.firstProvided.Store(&now)
		}
	}
	return s.Stream.Write(b)
}

// isAddProvider reports whether b, one length-delimited kad-dht message,
// is an ADD_PROVIDER request for key: field 1 (type) is 2 and field 2
// (key) is key.
func isAddProvider(b, key []byte) bool {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return false
	}
	b = b[k : k+int(n)]
	typ, gotKey := uint64(0), []byte(nil)
	for len(b) > 0 {
		tag, k := binary.Uvarint(b)
		if k <= 0 {
			return false
		}
		b = b[k:]
		switch tag & 7 {
		case 0: // varint
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return false
			}
			if tag>>3 == 1 {
				typ = v
			}
			b = b[k:]
		case 2: // length-delimited
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return false
			}
			if tag>>3 == 2 {
				gotKey = b[k : k+int(l)]
			}
			b = b[k+int(l):]
		case 1:
			if len(b) < 8 {
				return false
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return false
			}
			b = b[4:]
		default:
			return false
		}
	}
	return typ == 2 && bytes.Equal(gotKey, key)
}

// simNode is one node of the simulated swarm, hosting one agent.
type simNode struct {
	idx    int
	h      host.Host
	dc     *dhtCounter
	disc   *discovery.Service
	r      *nproto.Router
	reg    *agentcard.Registry
	cancel context.CancelFunc
	wg     sync.WaitGroup // the peerstore forgetter
	agent  string
	busy   atomic.Bool // a lookup from this node is in flight

	// With NOVA_SIM_TRACE: when the node started and when its first
	// publish succeeded (zero until then), in simulated time.
	started   time.Time
	published atomic.Pointer[time.Time]
}

func (n *simNode) info() peer.AddrInfo { return peer.AddrInfo{ID: n.h.ID(), Addrs: n.h.Addrs()} }

func (n *simNode) stop() {
	_ = n.r.Close()
	_ = n.disc.Close()
	n.cancel()
	n.wg.Wait()
	_ = n.h.Close()
}

// sim is the swarm and what it measured.
type sim struct {
	t      *testing.T
	p      simParams
	nw     *packetNet
	next   int // index of the next node: its IP and agent name
	online []*simNode
	rng    *mrand.Rand
	wall   time.Duration // wallClock at the start, for progress lines

	mu   sync.Mutex
	recv map[string]map[int]time.Time // broadcast id -> node idx -> delivery time

	traceMu sync.Mutex // one trace at a time

	// opened counts the connections the nodes opened, each once (at the
	// end that dialled).
	opened atomic.Int64
	forgot atomic.Uint64 // peers the nodes dropped from their peerstores
}

func (s *sim) start(boot []peer.AddrInfo) (*simNode, error) {
	idx := s.next
	s.next++
	addr := fmt.Sprintf("/ip4/%s/udp/8000/quic-v1", ipFor(idx))
	cm, err := connmgr.NewConnManager(s.p.connLow, s.p.connHigh, connmgr.WithGracePeriod(s.p.grace))
	if err != nil {
		return nil, err
	}
	h, err := libp2p.New(
		libp2p.ListenAddrStrings(addr),
		quicOn(s.nw),
		libp2p.DisableIdentifyAddressDiscovery(), // stalls synctest (x/simlibp2p)
		libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.ConnectionManager(cm),
	)
	if err != nil {
		return nil, err
	}
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.Stat().Direction == network.DirOutbound {
			s.opened.Add(1)
		}
	}})
	key := h.Peerstore().PrivKey(h.ID())
	ctx, cancel := context.WithCancel(context.Background())
	n := &simNode{idx: idx, h: h, cancel: cancel, agent: fmt.Sprintf("s%d", idx), started: time.Now()}
	fail := func(err error) (*simNode, error) {
		cancel()
		_ = h.Close()
		return nil, err
	}
	ps, err := pubsub.NewGossipSub(ctx, node.ProtectAsTag(h), nproto.PubSubOptions(simSwarm, 1<<20)...)
	if err != nil {
		return fail(err)
	}
	n.reg = agentcard.NewRegistry(h.ID(), agentcard.WithRemoteTTL(discovery.DefaultTTL))
	card := agentcard.Card{
		ID: n.agent, Name: n.agent, Version: "1.0.0", Description: "simulated agent", Tier: tiers.L2,
		Protocols: []string{"a2a/1.0"}, Endpoints: []agentcard.Endpoint{{Transport: "libp2p", Address: "/nova/a2a/1.0.0"}},
		Capabilities: []agentcard.Capability{{ID: "echo", Name: "echo"}},
	}
	if _, err := n.reg.Register(card); err != nil {
		return fail(err)
	}
	n.dc = &dhtCounter{Host: node.ProtectAsTag(h)} // as a node's (node/node.go)
	if s.p.trace {
		n.dc.nameMH = discovery.KeyCID(discovery.NameKey(simSwarm, n.agent)).Hash()
	}
	// The roster rides on its GossipSub topic as on a node (node/node.go):
	// discovery publishes through it, and the topic's validator hands
	// each message to discovery.
	roster, err := ps.Join(discovery.RosterTopic(simSwarm))
	if err != nil {
		return fail(err)
	}
	gossip := []discovery.Option{discovery.WithGossip(func(ctx context.Context, msg []byte) error { return roster.Publish(ctx, msg) })}
	if !s.p.resend {
		gossip = append(gossip, discovery.WithGossipPeers(func() int { return len(roster.ListPeers()) }))
	}
	if s.p.dhtRoster {
		gossip = []discovery.Option{discovery.WithGossip(nil)}
	}
	n.disc, err = discovery.New(n.dc, key, simSwarm, n.reg, n.reg, append(gossip,
		discovery.WithBootstrapPeers(boot), discovery.WithMDNS(false),
		// The host's one address, polled: the kernel's address
		// notifications (netlink) are real I/O, which never lets a
		// synctest bubble's clock move.
		discovery.WithInterfaceAddrs(func() ([]net.IP, error) { return []net.IP{ipFor(idx)}, nil }), discovery.WithTTL(discovery.DefaultTTL),
		discovery.WithLogger(zap.NewNop().Sugar()))...)
	if err != nil {
		return fail(err)
	}
	if !s.p.dhtRoster {
		if _, err := node.CarryRoster(ps, roster, n.disc); err != nil { // as a node does; ends with the node's GossipSub
			_ = n.disc.Close()
			return fail(err)
		}
	}
	n.r, err = nproto.New(h, n.reg, nproto.WithPubSub(ps, simSwarm), nproto.WithResolver(n.disc, 0),
		nproto.WithMaxFrameSize(1<<20), nproto.WithRequestTimeout(10*time.Second))
	if err != nil {
		_ = n.disc.Close()
		return fail(err)
	}
	n.r.Handle(n.agent, func(_ context.Context, env *envelope.Envelope) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if m := s.recv[env.ID]; m != nil {
			if _, dup := m[idx]; !dup {
				m[idx] = time.Now()
			}
		}
		return nil, nil
	})
	if !s.p.keepPeers { // as a node does (node/node.go)
		n.wg.Go(func() { connhealth.ForgetPeers(ctx, h, connhealth.ForgetAfter, &s.forgot, zap.NewNop().Sugar()) })
	}
	if err := n.disc.Start(ctx); err != nil {
		n.stop()
		return nil, err
	}
	if err := n.r.Start(ctx); err != nil {
		n.stop()
		return nil, err
	}
	if s.p.trace {
		go n.watchPublish(ctx)
	}
	return n, nil
}

// watchPublish records when the node's first publish succeeds.
func (n *simNode) watchPublish(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.disc.Stats().Publishes > 0 {
			now := time.Now()
			n.published.Store(&now)
			return
		}
	}
}

// bootPeers picks up to three random online nodes.
func (s *sim) bootPeers() []peer.AddrInfo {
	var out []peer.AddrInfo
	for _, i := range s.rng.Perm(len(s.online))[:min(3, len(s.online))] {
		out = append(out, s.online[i].info())
	}
	return out
}

// join starts k nodes, each bootstrapping from three random online nodes.
func (s *sim) join(k int) {
	for range k {
		n, err := s.start(s.bootPeers())
		if err != nil {
			s.t.Fatalf("sim: start node %d: %v", s.next-1, err)
		}
		s.online = append(s.online, n)
	}
}

// leave stops k random online nodes.
// churn replaces k random online nodes with k new ones: all at once, or
// one at a time spread evenly over p.spread, as nodes come and go in a
// real swarm. Spread, a newcomer's first connections (its DHT's first
// lookups reach a few hundred peers, each held through the connection
// manager's grace period) overlap those of a few others, not of every
// newcomer of the minute.
// It returns the nodes it started.
func (s *sim) churn(k int) []*simNode {
	if s.p.spread == 0 || k == 0 {
		s.leave(k)
		s.join(k)
		return slices.Clone(s.online[len(s.online)-k:])
	}
	gap := s.p.spread / time.Duration(k)
	var fresh []*simNode
	for i := range k {
		if i > 0 {
			time.Sleep(gap)
		}
		s.leave(1)
		s.join(1)
		fresh = append(fresh, s.online[len(s.online)-1])
	}
	return fresh
}

func (s *sim) leave(k int) {
	s.rng.Shuffle(len(s.online), func(i, j int) { s.online[i], s.online[j] = s.online[j], s.online[i] })
	for _, n := range s.online[:k] {
		n.stop()
	}
	s.online = slices.Delete(s.online, 0, k)
}

// lookupStats gathers a minute's lookups.
type lookupStats struct {
	mu       sync.Mutex
	ok, fail int
	// held counts the lookups the DHT answered with no provider yet but
	// whose card the looking node's registry holds (brought by roster
	// gossip): found for a user, as Node.Find lists the registry after the
	// DHT query. They count in ok too.
	held int
	lat  []time.Duration
	reqs []int
	errs map[string]int
}

// lookups runs k lookups by name of random online agents from random
// online nodes, at most par at once and one at a time per looking node
// (so its DHT request count belongs to that lookup, plus whatever
// background traffic the node sends meanwhile).
func (s *sim) lookups(k, par int, st *lookupStats) {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for range k {
		var from, to *simNode
		for {
			from, to = s.online[s.rng.IntN(len(s.online))], s.online[s.rng.IntN(len(s.online))]
			if from != to && from.busy.CompareAndSwap(false, true) {
				break
			}
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem; from.busy.Store(false) }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before := from.dc.sent.Load()
			t0 := time.Now()
			cards, err := from.disc.FindByName(ctx, to.agent)
			lat := time.Since(t0)
			reqs := int(from.dc.sent.Load() - before)
			found := err == nil && slices.ContainsFunc(cards, func(c agentcard.Card) bool { return c.Host == to.h.ID().String() })
			_, held := from.reg.Get(to.agent + "@" + to.h.ID().String())
			st.mu.Lock()
			defer st.mu.Unlock()
			// A quarter at a time, with the wall time: at 1,000 nodes the
			// lookups of one minute ran for more than eight minutes of it.
			defer func() { // runs before the unlock, once this lookup counts
				if done := st.ok + st.fail; k >= 4 && done%(k/4) == 0 {
					s.t.Logf("sim: lookups %d of %d done (%d found so far), %s wall", done, k, st.ok, (wallClock() - s.wall).Round(time.Second))
				}
			}()
			if !found && held {
				st.held++
			}
			if found || held {
				st.ok++
				st.lat = append(st.lat, lat)
				st.reqs = append(st.reqs, reqs)
				return
			}
			st.fail++
			if s.p.trace {
				st.mu.Unlock()
				s.traceMiss(from, to, lat, err)
				st.mu.Lock()
			}
			msg := "found other hosts"
			if err != nil {
				msg = err.Error()
				if len(msg) > 80 {
					msg = msg[:80]
				}
			}
			if st.errs == nil {
				st.errs = map[string]int{}
			}
			st.errs[msg]++
		})
	}
	wg.Wait()
}

// traceMiss logs where the provider record of to's name is when a lookup
// of it from from failed: which of the online nodes closest to the name
// key hold it, whether the looking node's routing table knows them, and
// when to's first publish completed. Lookups run while no node joins or
// leaves, so s.online is stable.
func (s *sim) traceMiss(from, to *simNode, lat time.Duration, lookupErr error) {
	s.traceMu.Lock()
	defer s.traceMu.Unlock()
	mh := discovery.KeyCID(discovery.NameKey(simSwarm, to.agent)).Hash()
	target := kb.ConvertKey(string(mh))
	byID := map[peer.ID]*simNode{}
	ids := make([]peer.ID, 0, len(s.online))
	for _, n := range s.online {
		byID[n.h.ID()] = n
		ids = append(ids, n.h.ID())
	}
	ids = kb.SortClosestPeers(ids, target)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ranks []string
	closeHeld, held, closeKnown := 0, 0, 0
	for i, id := range ids {
		n := byID[id]
		provs, err := n.disc.DHT().ProviderStore().GetProviders(ctx, mh)
		has := err == nil && slices.ContainsFunc(provs, func(ai peer.AddrInfo) bool { return ai.ID == to.h.ID() })
		known := from.disc.DHT().RoutingTable().Find(id) != ""
		if has {
			held++
			ranks = append(ranks, strconv.Itoa(i))
		}
		if i < 20 {
			if has {
				closeHeld++
			}
			if known {
				closeKnown++
			}
		}
	}
	pub := "none yet"
	if at := to.published.Load(); at != nil {
		pub = at.Sub(to.started).String()
	}
	if at := to.dc.firstProvided.Load(); at != nil {
		pub += fmt.Sprintf(", first ADD_PROVIDER of its name %s after start (%d sent)", at.Sub(to.started), to.dc.nameProvides.Load())
	} else {
		pub += ", no ADD_PROVIDER of its name sent"
	}
	st := to.disc.Stats()
	s.t.Logf("sim: trace: lookup of %s from node %d failed after %s (%v): target up %s, first publish after %s (%d ok, %d failed), routing table %d; looker up %s, routing table %d, knows %d of the 20 online nodes closest to the key; record held by %d of those 20 and by %d of %d online nodes, at ranks %v",
		to.agent, from.idx, lat, lookupErr, time.Since(to.started).Round(time.Millisecond), pub, st.Publishes, st.PublishFailures,
		to.disc.DHT().RoutingTable().Size(), time.Since(from.started).Round(time.Second), from.disc.DHT().RoutingTable().Size(),
		closeKnown, closeHeld, held, len(ids), ranks)
}

// tracePublishes logs how long the nodes that joined took to complete
// their first publish, as of now.
func (s *sim) tracePublishes(m int, fresh []*simNode) {
	var ds, ps []time.Duration
	var sent []int
	pending, unsent := 0, 0
	for _, n := range fresh {
		if at := n.published.Load(); at != nil {
			ds = append(ds, at.Sub(n.started))
		} else {
			pending++
		}
		if at := n.dc.firstProvided.Load(); at != nil {
			ps = append(ps, at.Sub(n.started))
		} else {
			unsent++
		}
		sent = append(sent, int(n.dc.nameProvides.Load()))
	}
	s.t.Logf("sim: trace: minute %d: %d joined; first publish done by %d: p50 %s p90 %s max %s, not done: %d; first ADD_PROVIDER of the name sent by %d: p50 %s p90 %s max %s, not sent: %d; ADD_PROVIDERs of the name sent p50 %d min %d",
		m, len(fresh), len(ds), pct(ds, .5), pct(ds, .9), pct(ds, 1), pending,
		len(ps), pct(ps, .5), pct(ps, .9), pct(ps, 1), unsent, pctInt(sent, .5), pctInt(sent, 0))
}

// broadcast sends one broadcast from a random online node and returns
// its id and the nodes online when it went out.
func (s *sim) broadcast() (string, time.Time, []*simNode, error) {
	from := s.online[s.rng.IntN(len(s.online))]
	env, err := envelope.NewFactory().New(from.agent, envelope.Broadcast, envelope.TypeNotification, "sim")
	if err != nil {
		return "", time.Time{}, nil, err
	}
	s.mu.Lock()
	s.recv[env.ID] = map[int]time.Time{}
	s.mu.Unlock()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := from.r.Send(ctx, env); err != nil {
		return "", time.Time{}, nil, err
	}
	var to []*simNode
	for _, n := range s.online {
		if n != from {
			to = append(to, n)
		}
	}
	return env.ID, t0, to, nil
}

// converged reports how many (online node, online agent of another node)
// pairs the node's registry holds, out of all.
func (s *sim) converged() (have, all int) {
	for _, n := range s.online {
		for _, m := range s.online {
			if n == m {
				continue
			}
			all++
			if _, ok := n.reg.Get(m.agent + "@" + m.h.ID().String()); ok {
				have++
			}
		}
	}
	return have, all
}

// writeSimHeapProfile writes the heap profile of the swarm as it runs (a
// test's -memprofile is written after every node stopped) to path, and
// its goroutine profile to path.goroutine.
func writeSimHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Errorf("sim: heap profile: %v", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Errorf("sim: heap profile: %v", err)
	}
	g, err := os.Create(path + ".goroutine")
	if err != nil {
		t.Errorf("sim: goroutine profile: %v", err)
		return
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 0); err != nil {
		t.Errorf("sim: goroutine profile: %v", err)
	}
}

// usage describes what the swarm holds: goroutines, heap, stacks and
// connections per node.
func (s *sim) usage() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	conns, maxConns, peers := 0, 0, 0
	for _, n := range s.online {
		c := len(n.h.Network().Conns())
		conns += c
		maxConns = max(maxConns, c)
		peers += len(n.h.Network().Peers())
	}
	return fmt.Sprintf("%d goroutines, heap %d MB (in use %d MB), stacks %d MB, from the OS %d MB; connections per node mean %.1f max %d, to %.1f peers; %d connections opened so far",
		runtime.NumGoroutine(), ms.HeapAlloc>>20, ms.HeapInuse>>20, ms.StackInuse>>20, ms.Sys>>20,
		float64(conns)/float64(max(len(s.online), 1)), maxConns, float64(peers)/float64(max(len(s.online), 1)), s.opened.Load())
}

// memory describes where the memory the process took from the OS goes,
// per node and per connection of the swarm: the heap's objects and, of
// them, the live heap (what a collection run here keeps: the rest is
// garbage), the heap's unused space in spans in use and its free spans
// not yet returned to the OS, goroutine stacks, the runtime's own, and
// what is resident now and at most so far. It runs a collection.
func (s *sim) memory() string {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/memory/classes/os-stacks:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	objects, unused, free, released, stacks := v(0), v(1), v(2), v(3), v(4)+v(5)
	total, goal, cycles := v(6), v(7), v(8)
	runtimeOwn := total - objects - unused - free - released - stacks
	runtime.GC()
	liveSample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(liveSample)
	live := uint64(0)
	if liveSample[0].Value.Kind() == metrics.KindUint64 {
		live = liveSample[0].Value.Uint64()
	}
	conns := 0
	for _, n := range s.online {
		conns += len(n.h.Network().Conns())
	}
	nodes := float64(max(len(s.online), 1))
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	rss, peak := residentKB()
	return fmt.Sprintf("memory: heap objects %.0f MB, of them live %.0f MB (%.2f MB a node, %.0f KB a connection); heap unused %.0f MB and free %.0f MB; stacks %.0f MB (%.2f MB a node); runtime %.0f MB; taken from the OS %.0f MB (%.1f MB a node), released %.0f MB, resident %.0f MB, peak resident %.0f MB (%.1f MB a node); heap goal %.0f MB, %d collections",
		mb(objects), mb(live), mb(live)/nodes, float64(live)/1024/float64(max(conns, 1)),
		mb(unused), mb(free), mb(stacks), mb(stacks)/nodes, mb(runtimeOwn),
		mb(total), mb(total)/nodes, mb(released), float64(rss)/1024, float64(peak)/1024, float64(peak)/1024/nodes,
		mb(goal), cycles)
}

// residentKB reads the process's resident set and its peak so far, in
// KiB, from /proc/self/status (zero where there is none).
func residentKB() (rss, peak uint64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.ParseUint(f[1], 10, 64)
		case "VmHWM:":
			peak, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	return rss, peak
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func pctInt(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(float64(len(xs))*p))]
}

// simGCPercent is the collector's GOGC in the simulation unless the
// environment sets GOGC.
const simGCPercent = 50

// TestSim1000Churn runs NOVA_SIM_N nodes (default 1,000) for
// NOVA_SIM_MINUTES simulated minutes; each minute NOVA_SIM_CHURN_PCT
// percent of them (default 10) leave and as many new ones join,
// bootstrapping through three random online nodes. Each minute it
// measures name lookups of random online agents from random online nodes
// (success, simulated latency, DHT requests sent), broadcast reach to the
// online nodes, and how much of the swarm every node's registry lists.
// Run it with -tags sim (see docs/simulation.md).
func TestSim1000Churn(t *testing.T) {
	p := readSimParams()
	wall := wallClock()
	// Every node's goroutine stacks count toward the collector's heap
	// goal, and the swarm holds about as much in stacks as in live heap,
	// so at GOGC=100 the heap grows to two and a half to three times its
	// live part before a collection. GOGC=50 takes a sixth to a fifth off
	// the memory a node costs, for a tenth to a fifth more CPU
	// (docs/simulation.md, Limits).
	gc := "GOGC " + os.Getenv("GOGC") + " (from the environment)"
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(simGCPercent))
		gc = fmt.Sprintf("GOGC %d", simGCPercent)
	}
	t.Logf("sim: %d nodes, %d minutes, %d%% churn per minute spread over %s, %d lookups and %d broadcasts per minute, warm-up %s, connections %d-%d, %s",
		p.n, p.minutes, p.churn, p.spread, p.lookups, p.bcasts, p.warmup, p.connLow, p.connHigh, gc)
	synctest.Test(t, func(t *testing.T) {
		nw := newPacketNet(pairLatency)
		s := &sim{t: t, p: p, nw: nw, wall: wall, rng: mrand.New(mrand.NewPCG(p.seed, 27)), recv: map[string]map[int]time.Time{}}
		defer func() {
			for _, n := range s.online {
				n.stop()
			}
		}()
		t0 := time.Now()
		for s.next < p.n {
			s.join(min(p.wave, p.n-s.next))
			time.Sleep(p.waveGap) // join in waves, as a swarm grows
			t.Logf("sim: %d nodes up after %s simulated, %s wall; %s", s.next, time.Since(t0).Round(time.Second), (wallClock() - wall).Round(time.Second), s.usage())
		}
		t.Logf("sim: %d nodes started in %s simulated, %s wall; %s", p.n, time.Since(t0).Round(time.Second), (wallClock() - wall).Round(time.Second), s.usage())
		time.Sleep(p.warmup)
		have, all := s.converged()
		var gossipSent, gossipSpared, gossipTaken, rosterCards uint64
		for _, n := range s.online {
			st := n.disc.Stats()
			gossipSent += st.GossipSent
			gossipSpared += st.GossipSpared
			gossipTaken += st.GossipTaken
			rosterCards += st.RosterCards
		}
		t.Logf("sim: after warm-up (%s wall): registries list %.2f%% of the online agents; roster messages sent %d (%d resends spared), taken by gossip %d, cards read by the DHT roster %d; %s; simulated datagrams %d",
			(wallClock() - wall).Round(time.Second), 100*float64(have)/float64(max(all, 1)), gossipSent, gossipSpared, gossipTaken, rosterCards, s.usage(), nw.sent.Load())
		if !p.dhtRoster && gossipTaken == 0 {
			t.Errorf("sim: no roster message was taken by gossip")
		}
		t.Logf("sim: after warm-up: %s; peers forgotten %d", s.memory(), s.forgot.Load())
		if path := os.Getenv("NOVA_SIM_HEAPPROFILE"); path != "" {
			writeSimHeapProfile(t, path)
		}

		var total lookupStats
		var reach, reachAll []float64
		var bcLat []time.Duration
		k := p.n * p.churn / 100
		for m := 1; m <= p.minutes; m++ {
			start := time.Now()
			fresh := s.churn(k)
			// New nodes publish as they start; lookups begin 10 s after
			// the last one started.
			time.Sleep(10 * time.Second)
			if path := os.Getenv("NOVA_SIM_HEAPPROFILE"); path != "" && m == 1 {
				t.Logf("sim: minute 1, 10 s after the churn: %s", s.memory())
				writeSimHeapProfile(t, path+".churn")
			}
			if p.trace {
				s.tracePublishes(m, fresh)
			}
			var st lookupStats
			s.lookups(p.lookups, p.parallel, &st)
			type sent struct {
				id string
				at time.Time
				to []*simNode
			}
			var bs []sent
			for range p.bcasts {
				id, at, to, err := s.broadcast()
				if err != nil {
					t.Errorf("sim: minute %d: broadcast: %v", m, err)
					continue
				}
				bs = append(bs, sent{id, at, to})
			}
			time.Sleep(20 * time.Second)
			minReach := 1.0
			for _, b := range bs {
				s.mu.Lock()
				got := s.recv[b.id]
				n := 0
				for _, to := range b.to {
					if at, ok := got[to.idx]; ok {
						n++
						bcLat = append(bcLat, at.Sub(b.at))
					}
				}
				s.mu.Unlock()
				r := float64(n) / float64(len(b.to))
				reach = append(reach, r)
				minReach = min(minReach, r)
				if n == len(b.to) {
					reachAll = append(reachAll, 1)
				} else {
					reachAll = append(reachAll, 0)
				}
			}
			have, all := s.converged()
			t.Logf("sim: minute %d: lookups %d/%d ok (%d of them from the registry alone), p50 %s p99 %s, DHT requests p50 %d p99 %d; broadcasts min reach %.2f%%; registries list %.2f%% of online agents; %s; wall %s; errors %v",
				m, st.ok, st.ok+st.fail, st.held, pct(st.lat, .5), pct(st.lat, .99), pctInt(st.reqs, .5), pctInt(st.reqs, .99),
				100*minReach, 100*float64(have)/float64(max(all, 1)), s.usage(), (wallClock() - wall).Round(time.Second), st.errs)
			total.ok += st.ok
			total.fail += st.fail
			total.held += st.held
			total.lat = append(total.lat, st.lat...)
			total.reqs = append(total.reqs, st.reqs...)
			if left := time.Minute - time.Since(start); left > 0 {
				time.Sleep(left)
			}
		}
		t.Logf("sim: at the end: %s; peers forgotten %d", s.memory(), s.forgot.Load())
		rate := float64(total.ok) / float64(max(total.ok+total.fail, 1))
		full := 0.0
		for _, r := range reachAll {
			full += r
		}
		meanReach := 0.0
		for _, r := range reach {
			meanReach += r
		}
		t.Logf("sim: RESULT n=%d minutes=%d churn=%d%%/min: lookups %d/%d = %.3f%% (%d from the registry alone), latency p50 %s p90 %s p99 %s max %s, DHT requests p50 %d p90 %d p99 %d; broadcasts %d, mean reach %.3f%%, all online reached in %.0f of %.0f, delivery p50 %s p99 %s; wall %s",
			p.n, p.minutes, p.churn, total.ok, total.ok+total.fail, 100*rate, total.held,
			pct(total.lat, .5), pct(total.lat, .9), pct(total.lat, .99), pct(total.lat, 1),
			pctInt(total.reqs, .5), pctInt(total.reqs, .9), pctInt(total.reqs, .99),
			len(reach), 100*meanReach/float64(max(len(reach), 1)), full, float64(len(reachAll)),
			pct(bcLat, .5), pct(bcLat, .99), (wallClock() - wall).Round(time.Second))
		if rate < 0.999 {
			t.Errorf("sim: lookup success %.3f%%, goal ≥ 99.9%%", 100*rate)
		}
		if full < float64(len(reachAll)) {
			t.Errorf("sim: %d of %d broadcasts missed an online node, goal 100%%", len(reachAll)-int(full), len(reachAll))
		}
	})
}
