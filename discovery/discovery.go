package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	golog "github.com/ipfs/go-log/v2"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/amino"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
)

var log = golog.Logger("nova/discovery")

// Sink receives the remote cards discovery finds and verifies.
// *agentcard.Registry satisfies it. seen is when the card's host was last
// known to be alive (its signed heartbeat, never later than the local
// clock): the sink's TTL for the card runs from seen, so a host that has
// left disappears one TTL after its last heartbeat even while its DHT
// records linger. The sink may keep c's slices: discovery caches the same
// card and never writes it, so a node holds each member's card once.
// MergeRemoteAtShared must not block for long: it is called from lookups
// and from the refresh loop.
type Sink interface {
	MergeRemoteAtShared(c agentcard.Card, seen time.Time) (changed bool, err error)
}

// Source gives the cards of the agents this node hosts, to publish.
// *agentcard.Registry satisfies it.
type Source interface {
	Local() []agentcard.Card
}

// Timing constants that are not options.
const (
	dialTimeout     = 10 * time.Second
	rtCheckInterval = time.Second // how often the publish loop looks at the routing table's growth
	maxJoinedVia    = 16          // peers remembered by JoinedVia, the latest kept
	rejoinMax       = time.Minute // longest wait between two rejoin attempts of a node left alone
	maxProviders    = 256         // providers read per lookup
	parallelism     = 16          // concurrent DHT operations per publish, lookup or refresh
)

// Service is nova's discovery: a Kademlia DHT on the "/nova" protocol
// prefix holding signed cards, signed agent indexes and provider records
// for agent names and capabilities; mDNS on the LAN; bootstrap peers; a
// republish loop (the heartbeat) and a refresh loop that keeps found
// cards alive in the [Sink] while their hosts keep publishing.
//
// [New] starts nothing. [Service.Start] creates the DHT and starts the
// loops; [Service.Close] stops and waits for every goroutine the service
// started, then closes the DHT. All methods are safe for concurrent use.
type Service struct {
	h     host.Host
	key   crypto.PrivKey
	self  peer.ID
	swarm string
	src   Source
	sink  Sink
	cfg   config
	log   *zap.SugaredLogger

	announce chan struct{}      // a local card changed; capacity 1, coalescing
	joined   chan struct{}      // the node has a connection again after none; capacity 1, coalescing
	booted   chan struct{}      // closed once the bootstrap peers have been dialled
	found    chan peer.AddrInfo // peers found by mDNS, for mdnsLoop

	// mu guards the lifecycle fields. It is never held while calling the
	// DHT, the sink or the source. No two of mu, pubMu and cache.mu are
	// ever held at once; sealMu is only ever taken under pubMu or alone.
	mu      sync.Mutex
	started bool
	closed  bool
	dht     *dht.IpfsDHT
	mdns    io.Closer
	ctx     context.Context // the service's lifetime, cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	pubMu       sync.Mutex      // serialises Publish, held across its DHT work
	provided    map[string]bool // provider keys provided to the closest peers since Start; guarded by pubMu
	rtAtPublish atomic.Int64    // routing-table size at the last publish
	// sealMu serialises the sealing of this node's records (sealOwn), for
	// a moment: a roster re-send seals without waiting for a publish's
	// DHT work.
	sealMu sync.Mutex
	stamp  int64 // last heartbeat sealed (unix ms); guarded by sealMu

	joinMu    sync.Mutex
	joinedVia []peer.AddrInfo // peers the node joined through by hand (JoinedVia); guarded by joinMu

	cache     cache
	gossip    gossip      // roster messages of others: their rates, held messages, cards to fetch
	pace      gossip      // the rate of this node's own roster messages
	gossipDue atomic.Bool // a roster message was held back by the rate
	// gossipReach is how many peers the roster topic had when this node's
	// latest roster message went out ([WithGossipPeers]); -1: not known.
	gossipReach atomic.Int64
	stats       counters
	own         atomic.Pointer[served] // the records last published, served on RecordsProtocol
	recStore    *quotaStore            // the DHT's value records, bounded; set by Start
	provStore   *quotaStore            // the DHT's provider records, bounded; set by Start
}

// New returns a discovery service for host h, whose identity key is key,
// in swarm (see [ValidateSwarm]). src gives the local cards to publish;
// sink receives verified remote cards. Both are usually the node's
// *agentcard.Registry. New validates its arguments and options and starts
// nothing.
//
// Defaults: no bootstrap peers, mDNS on, DHT mode server, TTL
// [DefaultTTL], republish every [DefaultRepublishInterval], refresh at the
// republish interval, lookup cache [DefaultLookupCacheTTL], [DefaultRetries]
// retries from [DefaultRetryBase], clock skew [DefaultMaxClockSkew],
// time.Now, go-log's "nova/discovery" logger.
func New(h host.Host, key crypto.PrivKey, swarm string, src Source, sink Sink, opts ...Option) (*Service, error) {
	if h == nil {
		return nil, errors.New("discovery: nil host")
	}
	if key == nil {
		return nil, errors.New("discovery: nil private key")
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("discovery: identity key: %w", err)
	}
	if self != h.ID() {
		return nil, fmt.Errorf("discovery: the key is %s's but the host is %s", self, h.ID())
	}
	if err := ValidateSwarm(swarm); err != nil {
		return nil, err
	}
	if src == nil || sink == nil {
		return nil, errors.New("discovery: nil card source or sink")
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := cfg.log
	if l == nil {
		s := self.String()
		l = log.With("self", s[len(s)-6:])
	}
	s := &Service{
		h: h, key: key, self: self, swarm: swarm, src: src, sink: sink, cfg: cfg, log: l,
		announce: make(chan struct{}, 1),
		joined:   make(chan struct{}, 1),
		booted:   make(chan struct{}),
		found:    make(chan peer.AddrInfo, 64),
		cache:    newCache(),
		gossip:   newGossip(),
		pace:     newGossip(),
	}
	s.gossipReach.Store(-1)
	return s, nil
}

// Start creates the DHT (protocol prefix "/nova", the configured mode, the
// nova validator, the bootstrap peers and no others, record lifetimes of
// one TTL), starts mDNS when enabled, and starts the loops: dial the
// bootstrap peers and bootstrap the DHT, publish at once and then every
// republish interval (sooner after [Service.Announce], after a failure,
// and whenever the routing table has doubled since the last publish), and
// refresh found cards every refresh interval. ctx bounds start-up only.
// Start is a no-op when already started; after Close it returns
// [ErrClosed]. An mDNS failure (no multicast interface) is logged and
// leaves the rest running.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.started:
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	opts := []dht.Option{
		dht.ProtocolPrefix(ProtocolPrefix),
		dht.Mode(s.cfg.mode),
		// Replacing the validator drops kad-dht's default "ipns" one, which
		// nova does not use; "pk" stays for dht.GetPublicKey.
		dht.Validator(record.NamespacedValidator{"pk": record.PublicKeyValidator{}}),
		dht.NamespacedValidator(Namespace, Validator{}),
		dht.BootstrapPeersFunc(s.rejoinPeers),
		dht.MaxRecordAge(s.cfg.ttl),
		dht.ValueGCInterval(s.cfg.ttl),
		dht.ProviderManagerOpts(records.ProvideValidity(s.cfg.ttl), records.CleanupInterval(s.cfg.ttl)),
	}
	recStore := newQuotaStore("record", s.cfg.records, recordAuthor, &s.stats.recordsRefused, s.log)
	provStore := newQuotaStore("provider", s.cfg.providers, providerAuthor, &s.stats.providersRefused, s.log)
	opts = append(opts, dht.ValueDatastore(recStore), dht.ProviderDatastore(provStore))
	opts = append(opts, s.cfg.dhtOptions...)
	d, err := dht.New(s.h, opts...)
	if err != nil {
		return fmt.Errorf("discovery: start DHT: %w", err)
	}
	var md io.Closer
	if s.cfg.mdns {
		if startMDNS == nil {
			s.log.Warnw("mDNS is not compiled into this build (see discovery/mdns.go); LAN peers will not be found without bootstrap peers")
		} else if md, err = startMDNS(s.h, ServiceName(s.swarm), s.peerFound); err != nil {
			s.log.Warnw("mDNS unavailable, LAN peers will not be found without bootstrap peers", "err", err)
			md = nil
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.dht, s.mdns, s.started = d, md, true
	s.recStore, s.provStore = recStore, provStore
	s.h.SetStreamHandler(RecordsProtocol, s.serveRecords)
	if s.cfg.gossip != nil {
		s.h.SetStreamHandler(RosterProtocol, s.serveRoster)
	}
	s.wg.Go(s.publishLoop)
	s.wg.Go(s.refreshLoop)
	if s.cfg.roster > 0 {
		s.wg.Go(s.rosterLoop)
	}
	if s.cfg.gossip != nil {
		s.wg.Go(s.fetchLoop)
	}
	if s.cfg.mdns && startMDNS != nil {
		s.wg.Go(s.mdnsLoop) // also when mDNS failed: a move restarts it
	}
	if s.cfg.ips != nil {
		s.wg.Go(func() { s.addrLoop(s.cfg.ips, s.cfg.ipsFromKernel) })
	}
	s.log.Infow("discovery started", "swarm", s.swarm, "mode", s.cfg.mode, "mdns", md != nil,
		"bootstrap", len(s.cfg.bootstrap), "ttl", s.cfg.ttl, "republish", s.cfg.republish)
	return nil
}

// Close stops mDNS and the loops, waits for every goroutine the service
// started, then removes the DHT's stream handler and closes the DHT. Lookups in progress fail with a cancelled
// context. Close is idempotent and safe before Start.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel, md, d := s.cancel, s.mdns, s.dht
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	var errs []error
	if md != nil {
		errs = append(errs, md.Close())
	}
	s.wg.Wait()
	if d != nil {
		// kad-dht's Close leaves its stream handler on the host.
		s.h.RemoveStreamHandler(dhtProtocol)
		s.h.RemoveStreamHandler(RecordsProtocol)
		s.h.RemoveStreamHandler(RosterProtocol)
		errs = append(errs, d.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("discovery: close: %w", err)
	}
	return nil
}

// DHT returns the service's DHT, nil before Start. The node may use it for
// peer routing (e.g. routedhost.Wrap) and content routing; it must not
// close it.
func (s *Service) DHT() *dht.IpfsDHT {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dht
}

// Announce asks the publish loop to publish the local cards soon: call it
// whenever a local card changes (registered, updated or removed). It never
// blocks; announcements made while a publish is pending coalesce. Before
// Start it does nothing (Start publishes anyway).
func (s *Service) Announce() {
	select {
	case s.announce <- struct{}{}:
	default:
	}
}

// running returns the DHT and a context that ends with ctx or with the
// service, whichever ends first; the caller must call the returned cancel.
func (s *Service) running(ctx context.Context) (*dht.IpfsDHT, context.Context, context.CancelFunc, error) {
	s.mu.Lock()
	closed, d, life := s.closed, s.dht, s.ctx
	s.mu.Unlock()
	switch {
	case closed:
		return nil, nil, nil, ErrClosed
	case d == nil:
		return nil, nil, nil, ErrNotStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(life, cancel)
	return d, ctx, func() { stop(); cancel() }, nil
}

// publishLoop dials the bootstrap peers, bootstraps the DHT, then publishes
// the local cards: at once, every republish interval, on Announce, after a
// failure (backing off from the retry base to the republish interval), and
// when the routing table has at least doubled since the last publish and
// then stopped growing (a record put while the network was small sits on
// peers that are no longer the closest to its key).
func (s *Service) publishLoop() {
	ctx, d := s.ctx, s.dht
	s.connectBootstrap(ctx)
	close(s.booted)
	if err := d.Bootstrap(ctx); err != nil {
		s.log.Debugw("DHT bootstrap", "err", err)
	}
	backoff := s.cfg.retryBase
	if backoff <= 0 {
		backoff = 100 * time.Millisecond
	}
	retry := backoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	rt := time.NewTicker(min(rtCheckInterval, s.cfg.republish))
	defer rt.Stop()
	rtSize := -1
	var alone rejoinPace
	retrying := false // the timer is a retry's, after a failed publish
	for {
		gossip := true
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			if retrying {
				// The failure was the DHT's: the roster message went out
				// before the puts, and once it reached enough of the topic
				// (gossipReached) sending it again under a new heartbeat
				// would cost every member one more message for nothing.
				gossip = !s.gossipReached()
			}
		case <-s.announce:
		case now := <-rt.C:
			attempt, back := alone.update(len(s.h.Network().Peers()) == 0, now)
			if attempt {
				s.rejoin(ctx, alone.attempts)
			}
			if back {
				select { // the roster loop runs a newcomer's passes again
				case s.joined <- struct{}{}:

				default:
				}
			}
			if !s.routingTableGrew(d, &rtSize) {
				continue
			}
			// New closest peers for the DHT records; the roster message
			// says nothing new when the last one reached the swarm.
			gossip = !s.gossipReached()
		}
		if err := s.publish(ctx, gossip); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Debugw("publish failed, retrying", "in", retry, "err", err)
			timer.Reset(retry)
			retry = min(2*retry, s.cfg.republish)
			retrying = true
			continue
		}
		retry, retrying = backoff, false
		timer.Reset(s.cfg.republish)
	}
}

// routingTableGrew reports whether the records should be put again
// because the swarm has grown under them (see [grewUnderRecords]); *prev
// is the routing table's size at the previous check.
func (s *Service) routingTableGrew(d *dht.IpfsDHT, prev *int) bool {
	n := d.RoutingTable().Size()
	grew := grewUnderRecords(n, *prev, int(s.rtAtPublish.Load()))
	*prev = n
	return grew
}

// grewUnderRecords reports whether a routing table of n peers (prev at the
// previous check) has grown enough since the last publish, when it held
// last, that the records then put no longer sit on the peers closest to
// their keys: last was below [amino.DefaultBucketSize] (k), so the swarm
// was smaller than k and every put reached all of it, and n has at least
// doubled since and stopped growing (n == prev), so that a burst of joins
// causes one publish. A publish that ended with k peers or more in the
// table walked a swarm larger than k to the k peers closest to each key,
// as the walks of a node that joins a settled swarm do (their answers
// fill its table), and putting the same records again once its table has
// filled would cost every key a second walk and k connections for
// records that are already in place; the republish interval moves them
// as the swarm changes.
func grewUnderRecords(n, prev, last int) bool {
	return last < amino.DefaultBucketSize && n == prev && n > last && n >= 2*last
}

// connectBootstrap dials every bootstrap peer at once and waits for the
// dials to end.
func (s *Service) connectBootstrap(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ai := range s.cfg.bootstrap {
		wg.Go(func() { s.connect(ctx, ai, "bootstrap") })
	}
	wg.Wait()
}

// JoinedVia remembers ai, a peer this node was told to connect to by hand
// (the node's Connect, the local API's POST /v1/connect), as a way back
// into the swarm beside the bootstrap peers: a node left with no
// connection at all dials them again, and the DHT dials them, with the
// bootstrap peers, when its routing table empties. The latest
// [maxJoinedVia] are kept, in memory only.
func (s *Service) JoinedVia(ai peer.AddrInfo) {
	if ai.ID == s.self || len(ai.Addrs) == 0 {
		return
	}
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	s.joinedVia = slices.DeleteFunc(s.joinedVia, func(p peer.AddrInfo) bool { return p.ID == ai.ID })
	if len(s.joinedVia) == maxJoinedVia {
		s.joinedVia = s.joinedVia[1:]
	}
	s.joinedVia = append(s.joinedVia, peer.AddrInfo{ID: ai.ID, Addrs: slices.Clone(ai.Addrs)})
}

// rejoinPeers returns the bootstrap peers and the peers the node joined
// through (JoinedVia): the DHT's bootstrap peers.
func (s *Service) rejoinPeers() []peer.AddrInfo {
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	out := slices.Clone(s.cfg.bootstrap)
	for _, ai := range s.joinedVia {
		if !slices.ContainsFunc(out, func(p peer.AddrInfo) bool { return p.ID == ai.ID }) {
			out = append(out, ai)
		}
	}
	return out
}

// rejoin dials the peers the node joined through by hand (JoinedVia) at
// once, clearing their dial backoff first (a node left alone is the case
// the backoff was not made for), and waits for the dials to end. attempt
// counts the attempts since the node was found alone; the first is logged
// at info. The bootstrap peers are not dialled here: the DHT dials them
// when its routing table empties, and a node's relay client dials those
// that relay. Dialling them here as well, every few seconds while a relay
// restarted, kept nodes behind NAT from taking their reservations again
// (TestNATRelayRestart, under load).
func (s *Service) rejoin(ctx context.Context, attempt int) {
	s.joinMu.Lock()
	peers := slices.Clone(s.joinedVia)
	s.joinMu.Unlock()
	if len(peers) == 0 {
		return
	}
	logf := s.log.Debugw
	if attempt == 1 {
		logf = s.log.Infow
	}
	logf("no connection left, dialling the peers this node joined through again", "peers", len(peers), "attempt", attempt)
	s.stats.rejoins.Add(1)
	var wg sync.WaitGroup
	for _, ai := range peers {
		if sw, ok := s.h.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
			sw.Backoff().Clear(ai.ID)
		}
		s.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
		wg.Go(func() { s.connect(ctx, ai, "rejoin") })
	}
	wg.Wait()
}

// rejoinPace paces a lone node's attempts to rejoin the swarm: the first
// one [rtCheckInterval] after the node is found with no connection, then
// after twice the last wait, up to [rejoinMax]; a connection resets it.
type rejoinPace struct {
	next     time.Time     // when the next attempt is due; zero: not alone
	wait     time.Duration // the wait after the next attempt
	attempts int           // attempts made since the node was found alone
}

// update takes whether the node is alone at now, and reports whether an
// attempt to rejoin is due, and whether the node is back: connected
// after it was last seen alone (at its start, or later).
func (r *rejoinPace) update(alone bool, now time.Time) (attempt, back bool) {
	switch {
	case !alone:
		back = !r.next.IsZero()
		*r = rejoinPace{}
		return false, back
	case r.next.IsZero():
		r.next, r.wait = now.Add(rtCheckInterval), 2*rtCheckInterval
		return false, false
	case now.Before(r.next):
		return false, false
	}
	r.next, r.wait = now.Add(r.wait), min(2*r.wait, rejoinMax)
	r.attempts++
	return true, false
}

func (s *Service) connect(ctx context.Context, ai peer.AddrInfo, why string) {
	if ai.ID == s.self || s.h.Network().Connectedness(ai.ID) == network.Connected {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := s.h.Connect(ctx, ai); err != nil {
		s.log.Debugw("dial failed", "peer", ai.ID, "via", why, "err", err)
		return
	}
	s.log.Debugw("connected", "peer", ai.ID, "via", why)
}

// refreshLoop re-reads the cards this node has found, every refresh
// interval, until the service closes.
func (s *Service) refreshLoop() {
	t := time.NewTicker(s.cfg.refresh)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.refresh(s.ctx, s.dht)
		}
	}
}

// startMDNS starts mDNS discovery of service on the host's LAN
// interfaces, calling found (on any goroutine) for every peer it sees,
// until the returned Closer is closed. It is nil when this build has no
// mDNS (see mdns.go).
var startMDNS func(h host.Host, service string, found func(peer.AddrInfo)) (io.Closer, error)

// peerFound hands a peer found by mDNS to mdnsLoop without blocking; when
// the queue is full the peer is dropped and counted, and mDNS finds it
// again on its next round.
func (s *Service) peerFound(ai peer.AddrInfo) {
	if ai.ID == s.self {
		return
	}
	select {
	case s.found <- ai:
	default:
		s.stats.mdnsDropped.Add(1)
	}
}

// mdnsLoop dials the peers mDNS finds, one at a time.
func (s *Service) mdnsLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case ai := <-s.found:
			s.stats.mdnsFound.Add(1)
			s.connect(s.ctx, ai, "mdns")
		}
	}
}

// Stats are counters of a service's activity since New.
type Stats struct {
	Publishes       uint64 // successful publishes of the local cards
	PublishFailures uint64 // publishes that failed at least in part
	Lookups         uint64 // FindByName, FindByCapability and Lookup calls
	CardsMerged     uint64 // cards handed to the sink (fresh and verified)
	CardsRefused    uint64 // cards read from the DHT and refused: stale, future-dated, or mismatched
	CacheHits       uint64 // card, index or provider reads answered from the cache
	MDNSFound       uint64 // peers found by mDNS and dialled
	MDNSDropped     uint64 // mDNS finds dropped because the dial queue was full
	Moves           uint64 // changes of this machine's IP addresses followed
	RosterCards     uint64 // cards of members found by the roster (see [Service.Roster])
	Served          uint64 // requests for this node's records answered on [RecordsProtocol]

	// DHT work this service started (kad-dht's own routing-table upkeep
	// is not counted).
	DHTQueries  uint64 // reading walks through the DHT: GetValue, FindProviders
	DHTRequests uint64 // single requests to a chosen peer: GET_VALUE to a host, GET_PROVIDERS within a quick provider query
	DHTWrites   uint64 // publishing walks: PutValue and Provide

	// The roster gossip (see [WithGossip]).
	GossipSent    uint64 // roster messages this node published
	GossipResent  uint64 // of them, sent again under a new heartbeat by a newcomer's roster passes
	GossipSpared  uint64 // roster passes that sent nothing: the last message had reached enough members (see [WithGossipPeers])
	GossipHeld    uint64 // roster messages held back because no peer was on the topic (see [WithGossipPeers]); the latest goes out once one is
	GossipTaken   uint64 // roster messages of others taken
	GossipCards   uint64 // cards merged from roster messages
	GossipIgnored uint64 // roster messages ignored: stale, already held, past their author's rate
	GossipRefused uint64 // roster messages refused as lies (each also a SecurityEvent)
	RosterServed  uint64 // snapshots of the roster served on [RosterProtocol]
	RosterAsked   uint64 // roster messages taken from snapshots asked for on [RosterProtocol]

	// The DHT store this node keeps for its peers (see [WithRecordLimits]).
	Records          int    // value records held
	RecordBytes      int    // their keys and values, in bytes
	RecordAuthors    int    // distinct authors of those records
	RecordsRefused   uint64 // puts refused at a bound
	Providers        int    // provider records held
	ProvidersRefused uint64 // provides refused at a bound

	RoutingTable int    // peers in the DHT's routing table
	Rejoins      uint64 // times this node, left with no connection, dialled its way back (see [Service.JoinedVia])
}

type counters struct {
	publishes, publishFailures, lookups, merged, refused, cacheHits, mdnsFound, mdnsDropped, moves, rosterCards atomic.Uint64
	recordsRefused, providersRefused, served, rejoins                                                           atomic.Uint64
	dhtQueries, dhtRequests, dhtWrites                                                                          atomic.Uint64
	gossipSpared, gossipHeld                                                                                    atomic.Uint64
	gossipSent, gossipResent, gossipTaken, gossipCards, gossipIgnored, gossipRefused, rosterServed, rosterAsked atomic.Uint64
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	st := Stats{
		Publishes: c.publishes.Load(), PublishFailures: c.publishFailures.Load(), Lookups: c.lookups.Load(),
		CardsMerged: c.merged.Load(), CardsRefused: c.refused.Load(), CacheHits: c.cacheHits.Load(),
		MDNSFound: c.mdnsFound.Load(), MDNSDropped: c.mdnsDropped.Load(), Moves: c.moves.Load(), RosterCards: c.rosterCards.Load(),
		RecordsRefused: c.recordsRefused.Load(), ProvidersRefused: c.providersRefused.Load(), Served: c.served.Load(),
		DHTQueries: c.dhtQueries.Load(), DHTRequests: c.dhtRequests.Load(), DHTWrites: c.dhtWrites.Load(),
		GossipSent: c.gossipSent.Load(), GossipResent: c.gossipResent.Load(), GossipSpared: c.gossipSpared.Load(), GossipHeld: c.gossipHeld.Load(), GossipTaken: c.gossipTaken.Load(), GossipCards: c.gossipCards.Load(),
		GossipIgnored: c.gossipIgnored.Load(), GossipRefused: c.gossipRefused.Load(),
		RosterServed: c.rosterServed.Load(), RosterAsked: c.rosterAsked.Load(), Rejoins: c.rejoins.Load(),
	}
	s.mu.Lock()
	rs, ps, d := s.recStore, s.provStore, s.dht
	s.mu.Unlock()
	if d != nil {
		st.RoutingTable = d.RoutingTable().Size()
	}
	if rs != nil {
		st.Records, st.RecordBytes, st.RecordAuthors = rs.usage()
		st.Providers, _, _ = ps.usage()
	}
	return st
}
