package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	webrtc "github.com/libp2p/go-libp2p/p2p/transport/webrtc"
	"github.com/libp2p/go-libp2p/p2p/transport/websocket"
	webtransport "github.com/libp2p/go-libp2p/p2p/transport/webtransport"
	"github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/internal/journal"
	"github.com/nova-node/nova-node/node/connhealth"
	"github.com/nova-node/nova-node/node/gossiphealth"
	"github.com/nova-node/nova-node/node/tasknode"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

var log = golog.Logger("nova/node")

// Version is the nova-node version, set at build time with
// -ldflags "-X github.com/nova-node/nova-node/node.Version=v1.2.3".
var Version = "0.1.0-dev"

// Node is one nova-node: identity, store, libp2p host, agent registry and
// router, replicated documents, tasks, the MCP bridge and the local faces.
// New builds every part; Start listens and starts them; Close unwinds what
// New and Start built, once, in reverse order.
type Node struct {
	cfg     Config
	key     crypto.PrivKey
	id      peer.ID
	reg     *agentcard.Registry
	db      *store
	obs     *Observer
	factory *envelope.Factory
	log     *zap.SugaredLogger

	// Built by New and never replaced: no accessor needs a nil check.
	host   host.Host           // no listener until Start
	listen []string            // the addresses Start listens on
	relay  *relayService       // reach.go: circuit relay service while reachable; from Start on
	health *connhealth.Monitor // TCP timeouts, ack checks, address book, configured peers; started by Start
	disc   *discovery.Service  // started by Start
	router *protocol.Router    // started by Start
	auth   *authz              // the swarm authority's book; judges remote cards
	docs   *crdt.Manager       // started by Start

	forgotPeers atomic.Uint64 // peers dropped from the peerstore (connhealth.ForgetPeers)

	mu       sync.Mutex
	handlers map[string]protocol.Handler
	tasks    *tasknode.Service // negotiation, swarms (tasks.go, node/tasknode); running between Start and Close
	mcp      *mcpState         // mcp.go: the MCP bridge, built by New, started by Start
	a2a      *a2aState         // a2a.go: the A2A gateway; nil when off or before Start
	api      *apiServer
	metrics  *metricsServer
	started  bool
	closed   bool
	stack    closers // what New and Start built; Close unwinds it
	wg       sync.WaitGroup

	// localToken is the data dir's local token (localtoken.go), which every
	// local HTTP face asks for: Start loads it, under mu, before anything
	// listens; read-only after.
	localToken string
}

// closers is the unwind stack of a Node: each part New or Start builds
// pushes its closer, and unwind calls them once, last pushed first.
type closers []func() error

func (c *closers) push(f func() error) { *c = append(*c, f) }

func (c *closers) unwind() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}

// New validates cfg, creates the data dir and identity if needed, opens the
// store, and builds every part of the node: the libp2p host (with no
// listener: it neither listens nor dials until Start), GossipSub,
// discovery, the router, the replicated documents, and the configured
// agents. go-libp2p and GossipSub run their own service goroutines from the
// moment they are built; nova's subsystems start nothing until Start. On
// error New closes what it built.
func New(cfg Config) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, _, err := EnsureIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var stack closers
	defer func() {
		if err != nil {
			_ = stack.unwind()
		}
	}()
	db, err := openStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	stack.push(db.close)
	obs, err := newObserver(filepath.Join(cfg.DataDir, AuditFile), 1000, cfg.Audit)
	if err != nil {
		return nil, fmt.Errorf("node: open audit log: %w", err)
	}
	stack.push(obs.close)
	n := &Node{
		cfg:      cfg,
		key:      key,
		id:       id,
		reg:      agentcard.NewRegistry(id, agentcard.WithRemoteTTL(discoveryTTL), agentcard.WithClock(clock.Now)),
		db:       db,
		obs:      obs,
		factory:  &envelope.Factory{Now: clock.Now, NewID: envelope.NewID}, // clock.Now: half time.Now's cost
		log:      log.With("self", id.String()[len(id.String())-6:]),
		handlers: map[string]protocol.Handler{},
	}
	if n.auth, err = n.newAuthz(); err != nil {
		return nil, err
	}
	stack.push(n.auth.close)
	if err := n.build(&stack); err != nil {
		return nil, err
	}
	n.stack = stack
	for _, a := range cfg.Agents {
		var h protocol.Handler
		if hasCap(a, "echo") {
			h = Echo
		}
		if _, err := n.RegisterAgent(a.Card(), h); err != nil {
			return nil, fmt.Errorf("node: agent %q: %w", a.Name, err)
		}
	}
	return n, nil
}

// build makes the host and the subsystems that run on it, pushing each
// closer on stack. Their order on the stack is the order Close stops them
// in, reversed: the local faces, the MCP bridge and the tasks first (they
// use the rest), then documents, router, discovery, GossipSub and its
// keeper, connection health, the host.
func (n *Node) build(stack *closers) error {
	n.health = n.newHealth() // before the host: its TCP transport is the Monitor's
	h, err := n.newHost()
	if err != nil {
		return err
	}
	stack.push(h.Close)
	n.health.Attach(h)
	stack.push(n.health.Close)
	boot, err := discovery.ParseAddrs(n.cfg.Bootstrap)
	if err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	// One GossipSub instance per node, for broadcasts and documents. Its
	// context is the node's whole life. Its keeper asks a still connected
	// peer for its subscriptions again when a pubsub stream between them
	// dies (gossiphealth), and closes after it.
	keeper := gossiphealth.New(h)
	stack.push(keeper.Close)
	psCtx, psCancel := context.WithCancel(context.Background())
	stack.push(func() error { psCancel(); return nil })
	ps, err := pubsub.NewGossipSub(psCtx, keeper.Host(ProtectAsTag(h)),
		append(protocol.PubSubOptions(n.cfg.Swarm, n.cfg.MaxFrameSize), keeper.Option())...)
	if err != nil {
		return fmt.Errorf("node: gossipsub: %w", err)
	}
	// Discovery's roster rides on its own topic: every member's signed
	// index and cards reach every node in one message per publish.
	roster, err := ps.Join(discovery.RosterTopic(n.cfg.Swarm))
	if err != nil {
		return fmt.Errorf("node: join the roster topic: %w", err)
	}
	disc, err := discovery.New(ProtectAsTag(h), n.key, n.cfg.Swarm, n.reg, n.reg,
		append([]discovery.Option{discovery.WithBootstrapPeers(boot), discovery.WithMDNS(n.cfg.MDNS), discovery.WithTTL(discoveryTTL),
			discovery.WithAuthority(n.auth.indexRecords, n.auth.acceptIndexRecords),
			discovery.WithGossip(func(ctx context.Context, msg []byte) error { return roster.Publish(ctx, msg) }),
			discovery.WithGossipPeers(func() int { return len(roster.ListPeers()) }),
			discovery.WithWithdrawals(func(host peer.ID, gone []string) { n.obs.Emit(protocol.WithdrawnEvent(host, gone)) }),
			discovery.WithSecurityEvents(func(e discovery.SecurityEvent) {
				n.obs.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Time: time.Now(), Code: e.Code, Peer: e.Peer,
					Detail: e.Detail, SourceTier: -1, TargetTier: -1})
			})},
			n.cfg.DiscoveryOptions...)...)
	if err != nil {
		return fmt.Errorf("node: discovery: %w", err)
	}
	stack.push(disc.Close)
	stopRelay, err := CarryRoster(ps, roster, disc)
	if err != nil {
		return err
	}
	stack.push(func() error { stopRelay(); return nil })
	ropts := []protocol.Option{
		protocol.WithPubSub(ps, n.cfg.Swarm),
		protocol.WithResolver(disc, 0),
		protocol.WithSandboxPolicy(n.cfg.Sandbox),
		protocol.WithAuthority(n.auth),
		protocol.WithMaxFrameSize(n.cfg.MaxFrameSize),
		protocol.WithEventSink(n.obs),
		protocol.WithPeerFinder(func(ctx context.Context, p peer.ID) ([]multiaddr.Multiaddr, error) {
			d := disc.DHT()
			if d == nil {
				return nil, errors.New("no DHT")
			}
			ai, err := d.FindPeer(ctx, p)
			return ai.Addrs, err
		}),
		protocol.WithMembers(func(p peer.ID) { h.ConnManager().TagPeer(p, memberTag, memberValue) }),
		protocol.WithFactory(n.factory),
		protocol.WithRequestTimeout(n.cfg.RequestTimeout),
		protocol.WithRetry(n.cfg.Retries, n.cfg.RetryDelay),
		protocol.WithDeliveryTTL(n.cfg.DeliveryTTL),
		protocol.WithStore(outboxStore{n.db}),
		protocol.WithAckCheck(n.health.AckCheck),
	}
	if n.cfg.TierRules != nil {
		ropts = append(ropts, protocol.WithTierRules(n.cfg.TierRules))
	}
	// The outbox's journal: a post is in it before Post returns, so a crash
	// loses nothing accepted (the store is written behind the traffic).
	j, recs, err := journal.Open(n.cfg.DataDir, journalSegment)
	if err != nil {
		return fmt.Errorf("node: open the outbox journal: %w", err)
	}
	stack.push(j.Close)
	ropts = append(ropts, protocol.WithJournal(j, recs))
	r, err := protocol.New(h, n.reg, ropts...)
	if err != nil {
		return err
	}
	stack.push(r.Close)
	docs, err := crdt.New(h, ps, n.cfg.Swarm, crdtStore{n.db}, crdt.WithSourceCheck(n.docSourceCheck),
		crdt.WithSecurityEvents(n.docSecurityEvent), crdt.WithLegacyRepair(n.docRepairAgent))
	if err != nil {
		return err
	}
	stack.push(docs.Close)
	n.tasks = n.newTasks(h, disc, r, docs)
	// Each safe when its part never started.
	stack.push(func() error { n.tasks.Close(); return nil })
	if err := n.buildMCP(h); err != nil {
		return err
	}
	stack.push(func() error { n.closeMCP(); return nil })
	stack.push(func() error { n.closeA2A(); return nil })
	n.host, n.disc, n.router, n.docs = h, disc, r, docs
	if err := n.obs.prom.reg.Register(serviceCollector{disc: disc, docs: docs, forgot: &n.forgotPeers}); err != nil {
		return fmt.Errorf("node: metrics: %w", err)
	}
	return nil
}

func hasCap(a AgentConfig, id string) bool {
	for _, c := range a.Capabilities {
		if c.ID == id {
			return true
		}
	}
	return false
}

// Card turns the declaration into an agent card (host and revision are set
// on registration).
func (a AgentConfig) Card() agentcard.Card {
	t := tiers.L3
	if dt, ok := tiers.DefaultTier(a.Name); ok {
		t = dt
	}
	if a.Tier != nil {
		t = *a.Tier
	}
	v := a.Version
	if v == "" {
		v = "1.0.0"
	}
	c := agentcard.Card{
		ID: a.Name, Name: a.Name, Version: v, Description: a.Description, Tier: t,
		Protocols:    []string{"a2a/1.0", "nova-a2a/1.0.0"},
		Endpoints:    []agentcard.Endpoint{{Transport: "libp2p", Address: string(protocol.IDA2A)}},
		Capabilities: []agentcard.Capability{},
		SandboxID:    a.Sandbox,
	}
	for _, cp := range a.Capabilities {
		if cp.ID == echoCap.ID && cp.Name == "" && cp.Description == "" {
			// The built-in capability reads the same however it was
			// declared (`--agent bob`, or "- echo" in config.yaml, which
			// init writes for it): the card, and its revision, do not
			// change when a node restarts with the other.
			cp = echoCap
		}
		name := cp.Name
		if name == "" {
			name = cp.ID
		}
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp.ID, Name: name, Description: cp.Description})
	}
	return c
}

// Echo is the built-in handler of the "echo" capability: it answers a
// request with the request's own payload.
func Echo(_ context.Context, env *envelope.Envelope) (any, error) {
	return env.Payload, nil
}

// RegisterAgent hosts an agent on this node: its card is validated, signed
// and announced to peers, its revision persisted (a changed card gets
// revision+1, also across restarts), and h answers what it receives (nil: the
// agent can send but not receive). Safe before and after Start.
func (n *Node) RegisterAgent(c agentcard.Card, h protocol.Handler) (agentcard.Card, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return agentcard.Card{}, protocol.ErrChannelClosed
	}
	if _, ok := n.reg.Get(c.ID); !ok {
		stored, found, err := n.db.card(c.ID)
		if err != nil {
			return agentcard.Card{}, err
		}
		if found {
			if err := n.reg.Restore(stored); err != nil {
				n.log.Warnw("stored card unusable, starting a new revision", "agent", c.ID, "err", err)
			}
		}
	}
	reg, err := n.reg.Register(c)
	if err != nil {
		return agentcard.Card{}, err
	}
	if err := n.db.putCard(reg); err != nil {
		return agentcard.Card{}, fmt.Errorf("node: persist card %s: %w", c.ID, err)
	}
	h = n.tasks.Wrap(c.ID, h)
	n.handlers[c.ID] = h
	n.router.Handle(c.ID, h)
	if n.started {
		n.router.Announce()
		n.disc.Announce()
	}
	return reg, nil
}

// Start listens on the configured addresses, starts discovery, the router,
// the documents, tasks, the MCP bridge and the local faces, and dials the
// configured peers. ctx bounds start-up only. If Start fails, the node is
// closed (as by Close): make a new one to try again.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return protocol.ErrChannelClosed
	}
	if n.started {
		return nil
	}
	defer func() {
		if err != nil {
			n.closed = true
			_ = n.stack.unwind()
		}
	}()
	if n.localToken, err = n.loadLocalToken(); err != nil {
		return err
	}
	if err := n.listenAll(); err != nil {
		return err
	}
	// After listening: a connection to the relay dialled earlier would
	// leave from another port than the listeners', so what the relay
	// observes of it would be useless for hole punching.
	if n.relay, err = startRelayService(n.host); err != nil {
		return err
	}
	n.stack.push(n.relay.close)
	punch, err := startPunchAgain(n.host)
	if err != nil {
		return err
	}
	n.stack.push(punch.close)
	if len(n.cfg.Relays)+len(n.cfg.Bootstrap) > 0 {
		closeClient, err := startRelayClient(n.host)
		if err != nil {
			return err
		}
		n.stack.push(closeClient)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Unwound first: the node's own goroutines end before the parts they use.
	n.stack.push(func() error { cancel(); n.wg.Wait(); return nil })
	n.wg.Go(func() { connhealth.ForgetPeers(runCtx, n.host, connhealth.ForgetAfter, &n.forgotPeers, n.log) })
	if err := n.disc.Start(ctx); err != nil {
		return fmt.Errorf("node: discovery: %w", err)
	}
	if err := n.router.Start(ctx); err != nil {
		return err
	}
	if err := n.docs.Start(ctx); err != nil {
		return err
	}
	// Tasks, swarms and the MCP bridge run on the router and documents;
	// build's closers stop them before those.
	if err := n.tasks.Start(runCtx); err != nil {
		return err
	}
	if err := n.startMCP(runCtx); err != nil {
		return err
	}
	api, err := startAPI(n, n.cfg.apiSocket())
	if err != nil {
		return err
	}
	n.api = api
	n.stack.push(api.close)
	if n.cfg.MetricsListen != "off" {
		ms, err := startMetrics(n.cfg.MetricsListen, n.obs.prom.reg, n.router.Channels, n.localFaces())
		if err != nil {
			return err
		}
		n.metrics = ms
		n.stack.push(ms.close)
	}
	if err := n.startA2A(runCtx); err != nil {
		return err
	}
	if err := n.health.Start(ctx); err != nil {
		return err
	}
	n.started = true
	n.hostRemoteA2A(runCtx)
	n.log.Infow("node started", "peer", n.id, "addrs", n.host.Addrs(), "agents", len(n.reg.Local()))
	return nil
}

func (c Config) apiSocket() string {
	if c.APISocket != "" {
		return c.APISocket
	}
	return filepath.Join(c.DataDir, "nova.sock")
}

// Close stops everything New and Start built, last built first: the node's
// own goroutines, the local faces, the MCP bridge, tasks, documents, router,
// discovery, GossipSub, connection health and the host; then the audit log
// and the store. It is idempotent and safe before Start.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	stack := n.stack
	n.stack = nil
	n.mu.Unlock()
	return stack.unwind()
}

// Docs is the node's replicated documents.
func (n *Node) Docs() *crdt.Manager { return n.docs }

// MetricsURL is where Prometheus metrics are served ("" when off or not started).
func (n *Node) MetricsURL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.metrics == nil {
		return ""
	}
	return n.metrics.url()
}

// ID is the node's peer ID.
func (n *Node) ID() peer.ID { return n.id }

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// Registry is the node's agent registry (local and remote cards).
func (n *Node) Registry() *agentcard.Registry { return n.reg }

// DiscoveryStats returns discovery's counters: DHT work, the roster's
// gossip and snapshots, the records held for peers.
func (n *Node) DiscoveryStats() discovery.Stats { return n.disc.Stats() }

// Observer gives the node's events and metrics.
func (n *Node) Observer() *Observer { return n.obs }

// Host is the libp2p host; it listens from Start on.
func (n *Node) Host() host.Host { return n.host }

// Router is the envelope router; it routes from Start on.
func (n *Node) Router() *protocol.Router { return n.router }

// Addrs returns the node's dialable addresses, each ending in /p2p/<id>
// (none before Start).
func (n *Node) Addrs() []multiaddr.Multiaddr {
	addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.id, Addrs: n.host.Addrs()})
	return addrs
}

// NewEnvelope builds an envelope with the node's factory.
func (n *Node) NewEnvelope(from, to string, t envelope.Type, payload any) (*envelope.Envelope, error) {
	return n.factory.New(from, to, t, payload)
}

// Send routes env (from a local agent) and reports where it went.
func (n *Node) Send(ctx context.Context, env *envelope.Envelope) (protocol.RoutingResult, error) {
	return n.router.Send(ctx, env)
}

// Request sends env and waits for its answer, bounded by ctx and the
// configured request timeout. The answer is the caller's.
func (n *Node) Request(ctx context.Context, env *envelope.Envelope) (*envelope.Envelope, protocol.RoutingResult, error) {
	return n.router.RequestWithin(ctx, env, n.cfg.RequestTimeout)
}

// discoveryTTL is how long a remote card stays valid after its host's last
// signed heartbeat (discovery republishes well within it).
const discoveryTTL = 10 * time.Minute

// journalSegment is the size of each of the outbox journal's two files in
// the data dir: half of one (about 20,000 small envelopes) between two
// checkpoints.
const journalSegment = 16 << 20

// Connect dials a peer multiaddr ending in /p2p/<peerID>. The peer is
// then one of the node's ways back into the swarm, beside its bootstrap
// peers: should the node find itself with no connection at all, it dials
// them again (discovery.Service.JoinedVia).
func (n *Node) Connect(ctx context.Context, addr string) (peer.ID, error) {
	ai, err := parsePeerAddr(addr)
	if err != nil {
		return "", err
	}
	if err := n.host.Connect(ctx, *ai); err != nil {
		return "", fmt.Errorf("node: connect to %s: %w", ai.ID, err)
	}
	n.mu.Lock()
	disc := n.disc
	n.mu.Unlock()
	if disc != nil {
		disc.JoinedVia(*ai)
	}
	return ai.ID, nil
}

func parsePeerAddr(a string) (*peer.AddrInfo, error) {
	ma, err := multiaddr.NewMultiaddr(a)
	if err != nil {
		return nil, fmt.Errorf("%q is not a multiaddr: %w", a, err)
	}
	ai, err := peer.AddrInfoFromP2pAddr(ma)
	if err != nil {
		return nil, fmt.Errorf("%q must end in /p2p/<peerID>: %w", a, err)
	}
	return ai, nil
}

// newHost builds the libp2p host: the node's key, Noise/TLS, yamux, the
// transports (TCP, QUIC, WebSocket…), the resource manager with nova's
// service limits, a connection manager, identify and ping on, no DHT and no
// bootstrap peers. It listens nowhere yet: it sets n.listen, the addresses
// Start listens on.
func (n *Node) newHost() (host.Host, error) {
	adm := n.cfg.Admission
	limits := limitConfig(adm.InboundConns)
	rm, err := newResourceManagerFrom(limits)
	if err != nil {
		return nil, err
	}
	low, high := watermarks(limits) // below the inbound limit: see Admission
	cmOpts := []connmgr.Option{connmgr.WithGracePeriod(cmp.Or(adm.GracePeriod, admissionGrace))}
	if adm.TrimInterval > 0 {
		cmOpts = append(cmOpts, connmgr.WithSilencePeriod(adm.TrimInterval))
	}
	cm, err := connmgr.NewConnManager(low, high, cmOpts...)
	if err != nil {
		rm.Close()
		return nil, err
	}
	listen, dropped := n.cfg.listenAddrs()
	opts := []libp2p.Option{
		libp2p.PrometheusRegisterer(n.obs.prom.reg),
		libp2p.Identity(n.key),
		libp2p.NoListenAddrs, // Start listens (listenAll)
		libp2p.EnableRelay(), // which NoListenAddrs alone would turn off
		libp2p.UserAgent("nova-node/" + Version),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.Ping(true),
		// Noise first, TLS for peers that offer only TLS: an idle Noise
		// connection holds no buffer, where a TLS one keeps the largest
		// record it has read (up to 16 KiB: a hello with cards fills one)
		// for the connection's life, and the Noise handshake has no
		// certificate to build and parse.
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.EnableHolePunching(),
		libp2p.EnableAutoNATv2(),
		// Relay service: startRelayService (reach.go), once AutoNAT v2
		// finds this node reachable.
	}
	// libp2p's default transports, with TCP sockets that drop a peer which
	// stops acknowledging (connhealth.TCPUserTimeout).
	transports := []libp2p.Option{
		libp2p.Transport(n.health.TCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Transport(websocket.New),
		libp2p.Transport(webtransport.New),
		libp2p.Transport(webrtc.New),
	}
	if n.cfg.ConnectionGater != nil {
		opts = append(opts, libp2p.ConnectionGater(n.cfg.ConnectionGater))
	}
	relays, err := relayCandidates(n.cfg)
	if err != nil {
		rm.Close()
		return nil, err
	}
	var src *relaySource
	if len(relays) > 0 {
		src = &relaySource{static: relays}
		opts = append(opts, libp2p.EnableAutoRelayWithPeerSource(src.peers, autorelayOptions()...))
	}
	if secret := n.cfg.Secret(); secret != nil {
		psk, err := discovery.PSK(n.cfg.Swarm, secret)
		if err != nil {
			rm.Close()
			return nil, err
		}
		// Private networks cannot run over QUIC in go-libp2p: TCP and
		// WebSocket only, and say so once.
		transports = []libp2p.Option{libp2p.Transport(n.health.TCPTransport), libp2p.Transport(websocket.New)}
		opts = append(opts, libp2p.PrivateNetwork(psk))
		switch {
		case len(dropped) > 0 && !defaultListen(n.cfg.Listen):
			// QUIC asked for by name: say why it is not there.
			n.log.Warnw("swarm secret set: QUIC cannot carry a private network, so these addresses are not used (TCP and WebSocket only)", "dropped", dropped)
		case len(dropped) > 0:
			// The default list: join said so, and a warning on every
			// start would tell nothing new.
			n.log.Debugw("swarm secret set: the default QUIC addresses are not used (TCP and WebSocket only)", "dropped", dropped)
		}
	}
	opts = append(opts, transports...)
	if len(listen) == 0 {
		rm.Close()
		return nil, errors.New("node: no address left to listen on: with a swarm secret, add a TCP or WebSocket address to listen")
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("node: libp2p host: %w", err)
	}
	if src != nil {
		src.h.Store(&h)
	}
	n.listen = listen
	return h, nil
}

// listenAll opens the listeners of the configured addresses. Like libp2p,
// it succeeds when at least one address can be listened on.
func (n *Node) listenAll() error {
	if err := checkPortsFree(n.listen); err != nil {
		return err
	}
	addrs := make([]multiaddr.Multiaddr, 0, len(n.listen))
	for _, s := range n.listen {
		a, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			return &ListenError{Addrs: n.listen, Err: err}
		}
		addrs = append(addrs, a)
	}
	if err := n.host.Network().Listen(addrs...); err != nil {
		return &ListenError{Addrs: n.listen, Err: err}
	}
	return nil
}

// checkPortsFree refuses listen addresses whose port is taken, before
// libp2p tries them. libp2p's TCP transport binds with SO_REUSEPORT (for
// hole punching), so a second node on the TCP port of a running one would
// start without a word and share its incoming connections: a dial to
// either could reach the other. A plain bind, which SO_REUSEPORT does not
// let through, tells. A taken UDP (QUIC) port libp2p does refuse, but with
// a raw error and log lines on stderr (which --json keeps for itself).
func checkPortsFree(listen []string) error {
	for _, s := range listen {
		a, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			continue // libp2p reports it
		}
		network, hostport, err := listenTarget(a)
		if err != nil {
			continue
		}
		var c io.Closer
		if strings.HasPrefix(network, "udp") {
			c, err = net.ListenPacket(network, hostport)
		} else {
			c, err = net.Listen(network, hostport)
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return &ListenError{Addrs: []string{s}, InUse: true, Err: err, detail: s}
		}
		if err == nil {
			_ = c.Close()
		}
	}
	return nil
}

// listenTarget is the net.Listen (or ListenPacket) network and address of
// a TCP, WebSocket over TCP, or UDP (QUIC, WebTransport) multiaddr with a
// fixed port.
func listenTarget(a multiaddr.Multiaddr) (network, hostport string, err error) {
	var ip, port string
	family := "4"
	if ip, err = a.ValueForProtocol(multiaddr.P_IP4); err != nil {
		if ip, err = a.ValueForProtocol(multiaddr.P_IP6); err != nil {
			return "", "", err
		}
		family = "6"
	}
	network = "tcp"
	if port, err = a.ValueForProtocol(multiaddr.P_TCP); err != nil {
		if port, err = a.ValueForProtocol(multiaddr.P_UDP); err != nil {
			return "", "", err
		}
		network = "udp"
	}
	if port == "0" {
		return "", "", errors.New("ephemeral port")
	}
	return network + family, net.JoinHostPort(ip, port), nil
}

// EnsureDataDir creates the data dir (0700) with its identity, a commented
// config file (unless one exists) and the store. It never overwrites.
func EnsureDataDir(cfg Config) (created bool, err error) {
	if created, err = PrepareDataDir(cfg); err != nil {
		return created, err
	}
	_, err = WriteConfig(cfg)
	return created, err
}

// PrepareDataDir creates the data dir (0700) with its identity and the
// store, but no config file: run writes that with [WriteConfig] once the
// node has started, so that a setting the node could not start with (a
// taken port) is not kept for the next start.
func PrepareDataDir(cfg Config) (created bool, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return false, fmt.Errorf("node: create data dir: %w", err)
	}
	_, created, err = EnsureIdentity(cfg.DataDir)
	if err != nil {
		return false, err
	}
	return created, InitStore(cfg.DataDir)
}

// WriteConfig writes the commented config.yaml of cfg (its swarm, listen
// addresses, peers, agents and log level) unless the data dir has one. It
// reports whether it wrote it; it never overwrites.
func WriteConfig(cfg Config) (written bool, err error) {
	return writeConfigTemplate(cfg)
}

// CarryRoster makes ps carry discovery's roster on roster (the topic
// discovery publishes on, [discovery.RosterTopic]): a validator hands each
// message to d ([discovery.Service.TakeGossip]: accepted, ignored or
// rejected as a lie), and the topic is relayed, not subscribed, since the
// validator does all the work and a relay needs no goroutine draining a
// subscription. stop ends the relay.
func CarryRoster(ps *pubsub.PubSub, roster *pubsub.Topic, d *discovery.Service) (stop func(), err error) {
	if err := ps.RegisterTopicValidator(roster.String(), func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		switch err := d.TakeGossip(m.GetFrom(), m.Data); {
		case err == nil:
			return pubsub.ValidationAccept
		case errors.Is(err, discovery.ErrGossipIgnored):
			return pubsub.ValidationIgnore
		default:
			return pubsub.ValidationReject
		}
	}, pubsub.WithValidatorInline(true)); err != nil {
		return nil, fmt.Errorf("node: roster validator: %w", err)
	}
	cancel, err := roster.Relay()
	if err != nil {
		return nil, fmt.Errorf("node: relay the roster topic: %w", err)
	}
	return func() { cancel() }, nil
}
