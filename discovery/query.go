package discovery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pb "github.com/libp2p/go-libp2p-kad-dht/pb"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
)

// Lookup tuning that is not an option.
const (
	// queryAlpha is how many peers a provider query asks at once, as
	// kad-dht does (amino.DefaultConcurrency).
	queryAlpha = 10
	// queryK is how many of the closest peers to a key a provider query
	// asks at most before it gives up: the peers a provider announces
	// itself to (kad-dht's bucket size).
	queryK = 20
	// providerQuorum is how many of the closest peers to a key must have
	// answered a provider query with the same providers before its quick
	// phase stops (see providerQuery.run). Every honest peer among the
	// closest holds every provider that reached it, so two answers that
	// agree give the whole set unless both come from peers that missed
	// the same provide.
	providerQuorum = 2
	// capabilityQuorum is providerQuorum for a capability, which many
	// agents offer: each provide reached the closest peers as its
	// provider saw them, and two answers missed providers in a swarm of
	// 100 nodes that had just formed. The answers past the second come
	// from the same round (queryAlpha peers are asked at once), so they
	// cost the wait for the fifth fastest answer, not another round.
	capabilityQuorum = 5
	// rpcTimeout bounds one DHT request to one peer within a lookup.
	rpcTimeout = 5 * time.Second
	// quorumGrace is how long a provider query waits for the rest of its
	// quorum once a first peer answered with providers: that long, or
	// three times what that first answer took, whichever is more. This
	// node's own store does not start it: its answer takes no time, and
	// three times nothing ended the query before a loaded machine's peers
	// could answer at all. A closest peer that left without closing its
	// connection (a laptop asleep) would otherwise hold the lookup for
	// rpcTimeout; the providers already found are being resolved
	// meanwhile, and a lookup that gets no card from them runs the full
	// query.
	quorumGrace = 100 * time.Millisecond
)

// messenger returns a kad-dht protocol messenger on the DHT's own message
// sender (its stream pool), for requests to one chosen peer.
func messenger(d *dht.IpfsDHT) *pb.ProtocolMessenger {
	pm, err := pb.NewProtocolMessenger(d.MessageSender())
	if err != nil {
		panic("discovery: kad-dht protocol messenger: " + err.Error()) // cannot happen: no options
	}
	return pm
}

// quickProviders is a Kademlia lookup of key's providers that stops as
// soon as quorum ([providerQuorum], [capabilityQuorum]) of the closest
// peers agree (see [providerQuery]). found is called on the query's
// goroutine for every new provider other than this node, as soon as it
// arrives, with the addresses the answering peer gave (also added to the
// peerstore for a while, as kad-dht does).
func (s *Service) quickProviders(ctx context.Context, d *dht.IpfsDHT, key string, quorum int, found func(peer.AddrInfo)) {
	q := s.queryProviders(ctx, d, key, quorum)
	defer q.close()
	q.run(ctx, found)
}

// queryProviders returns the provider query of key on d (see
// [providerQuery]): this node's provider store, the peers of its routing
// table closest to the key (or, while that holds fewer than [queryK],
// every peer it is connected to), and GET_PROVIDERS requests on d's
// message sender, each counted. Its requests end with life or its close.
func (s *Service) queryProviders(life context.Context, d *dht.IpfsDHT, key string, quorum int) *providerQuery {
	mh := KeyCID(key).Hash()
	target := kb.ConvertKey(string(mh))
	pm := messenger(d)
	ps := s.h.Peerstore()
	local, _ := d.ProviderStore().GetProviders(life, mh)
	start := d.RoutingTable().NearestPeers(target, queryK)
	if len(start) < queryK {
		// A node that has just started has connections (its bootstrap
		// peers) before identify has put them in its routing table.
		start = append(start, s.h.Network().Peers()...)
	}
	return newProviderQuery(life, s.self, mh, quorum, local, start,
		func(ctx context.Context, p peer.ID) ([]*peer.AddrInfo, []*peer.AddrInfo, error) {
			s.stats.dhtRequests.Add(1)
			return pm.GetProviders(ctx, p, mh)
		},
		func(ai peer.AddrInfo) {
			if len(ai.Addrs) > 0 {
				ps.AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			}
		})
}

// peerState is what a provider query knows of one peer.
type peerState uint8

const (
	heard peerState = iota
	waiting
	answered
	failed
)

// providerAnswer is one peer's answer to GET_PROVIDERS.
type providerAnswer struct {
	from          peer.ID
	provs, closer []*peer.AddrInfo
	err           error
}

// providerQuery is one Kademlia lookup of a key's providers (the
// iterative GET_PROVIDERS of kad-dht's FindProvidersAsync) that answers
// before the closest peers have all answered. It asks up to [queryAlpha]
// peers at once, starting from the peers it was given and moving to the
// closer peers they name, among the [queryK] closest to the key it has
// heard of that have not failed.
//
// Its run answers a lookup: it stops once quorum of those closest peers
// (this node among them, through its own provider store) have answered
// with providers besides this node, and all name the same ones. Answers
// that differ mean a provide reached only some of the closest peers, so
// others may miss providers too: run then asks every one of them.
//
// Its I/O goes through two functions, so that its rules are tested on
// fake time: ask sends one GET_PROVIDERS request, learn keeps the
// addresses an answer gave for a peer or a provider. Its requests run on
// goroutines of its own, which close ends and waits for; the goroutine
// that runs it owns the rest.
type providerQuery struct {
	self   peer.ID
	key    string // the multihash, as kbucket's distance functions take it
	target kb.ID
	quorum int
	local  []peer.AddrInfo // this node's own provider store
	ask    func(ctx context.Context, p peer.ID) (provs, closer []*peer.AddrInfo, err error)
	learn  func(peer.AddrInfo)

	ctx     context.Context // the requests'; cancelled by close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	answers chan providerAnswer

	peers    map[peer.ID]peerState
	order    []peer.ID             // every peer heard of, closest to the key first
	named    map[peer.ID][]peer.ID // the providers besides this node each answer named, this node's store under self
	seen     map[peer.ID]bool      // providers reported
	inflight int
	start    time.Time
	first    time.Duration // the wait for the first peer's answer with providers; 0: none yet
}

// newProviderQuery returns the provider query of the key whose multihash
// is mh, from this node self: local is what its own provider store holds,
// start the peers to ask first. Its requests end with life or close.
func newProviderQuery(life context.Context, self peer.ID, mh []byte, quorum int, local []peer.AddrInfo, start []peer.ID,
	ask func(ctx context.Context, p peer.ID) ([]*peer.AddrInfo, []*peer.AddrInfo, error), learn func(peer.AddrInfo)) *providerQuery {
	ctx, cancel := context.WithCancel(life)
	q := &providerQuery{
		self: self, key: string(mh), target: kb.ConvertKey(string(mh)), quorum: quorum, local: local, ask: ask, learn: learn,
		ctx: ctx, cancel: cancel, answers: make(chan providerAnswer),
		peers: map[peer.ID]peerState{}, named: map[peer.ID][]peer.ID{}, seen: map[peer.ID]bool{},
	}
	for _, p := range start {
		q.add(p)
	}
	q.order = kb.SortClosestPeers(q.order, q.target)
	return q
}

// close ends the query's requests and waits for them.
func (q *providerQuery) close() {
	q.cancel()
	q.wg.Wait()
}

func (q *providerQuery) add(p peer.ID) bool {
	if p == q.self || p == "" {
		return false
	}
	if _, ok := q.peers[p]; ok {
		return false
	}
	q.peers[p] = heard
	q.order = append(q.order, p)
	return true
}

// take records the providers one answer named (this node's store's, under
// self, or a peer's) and reports each new one through found, this node
// left out.
func (q *providerQuery) take(from peer.ID, provs []peer.AddrInfo, found func(peer.AddrInfo)) {
	var named []peer.ID
	for _, ai := range provs {
		if ai.ID == "" || ai.ID == q.self || slices.Contains(named, ai.ID) {
			continue
		}
		named = append(named, ai.ID)
		if q.seen[ai.ID] {
			continue
		}
		q.seen[ai.ID] = true
		q.learn(ai)
		found(ai)
	}
	q.named[from] = named
}

// closest returns the [queryK] peers closest to the key that have not
// failed, closest first.
func (q *providerQuery) closest() []peer.ID {
	out := make([]peer.ID, 0, queryK)
	for _, p := range q.order {
		if len(out) == queryK {
			break
		}
		if q.peers[p] != failed {
			out = append(out, p)
		}
	}
	return out
}

// enough reports whether the quick phase may stop: quorum of the closest
// peers (this node counts when it is among them) have answered with
// providers besides this node, and every such answer names the same ones.
func (q *providerQuery) enough() bool {
	closest := q.closest()
	selfClose := len(closest) < queryK || kb.Closer(q.self, closest[len(closest)-1], q.key)
	var sets [][]peer.ID
	if selfClose && len(q.named[q.self]) > 0 {
		sets = append(sets, q.named[q.self])
	}
	for _, p := range closest {
		if q.peers[p] == answered && len(q.named[p]) > 0 {
			sets = append(sets, q.named[p])
		}
	}
	if len(sets) < q.quorum {
		return false
	}
	union := map[peer.ID]bool{}
	for _, set := range sets {
		for _, p := range set {
			union[p] = true
		}
	}
	for _, set := range sets {
		if len(set) != len(union) {
			return false
		}
	}
	return true
}

// send asks the closest peers not asked yet, up to [queryAlpha] requests
// in flight.
func (q *providerQuery) send() {
	for _, p := range q.closest() {
		if q.inflight >= queryAlpha {
			return
		}
		if q.peers[p] != heard {
			continue
		}
		q.peers[p] = waiting
		q.inflight++
		q.wg.Go(func() {
			rctx, rcancel := context.WithTimeout(q.ctx, rpcTimeout)
			provs, closer, err := q.ask(rctx, p)
			rcancel()
			select {
			case q.answers <- providerAnswer{p, provs, closer, err}:
			case <-q.ctx.Done():
			}
		})
	}
}

// receive takes one answer: its providers (through found) and the closer
// peers it named.
func (q *providerQuery) receive(a providerAnswer, found func(peer.AddrInfo)) {
	q.inflight--
	if a.err != nil {
		q.peers[a.from] = failed
		return
	}
	q.peers[a.from] = answered
	provs := make([]peer.AddrInfo, 0, len(a.provs))
	for _, ai := range a.provs {
		if ai != nil {
			provs = append(provs, *ai)
		}
	}
	q.take(a.from, provs, found)
	if len(q.named[a.from]) > 0 && q.first == 0 {
		q.first = max(time.Since(q.start), time.Nanosecond)
	}
	grew := false
	for _, ai := range a.closer {
		if ai == nil || !q.add(ai.ID) {
			continue
		}
		q.learn(*ai)
		grew = true
	}
	if grew {
		q.order = kb.SortClosestPeers(q.order, q.target)
	}
}

// run takes this node's own providers, then asks
// peers until enough of the closest agree (see [providerQuery]), the
// grace after the first peer's answer with providers ran out
// ([quorumGrace]), ctx ended, or the closest peers all answered or
// failed; only then it reports the query complete. found is called on
// run's goroutine for every provider besides this node, as it arrives.
func (q *providerQuery) run(ctx context.Context, found func(peer.AddrInfo)) (complete bool) {
	q.start = time.Now()
	q.take(q.self, q.local, found)
	var grace <-chan time.Time // armed by the first peer's answer with providers
	for !q.enough() {
		if q.first > 0 && grace == nil {
			t := time.NewTimer(max(quorumGrace, 3*q.first))
			defer t.Stop()
			grace = t.C
		}
		q.send()
		if q.inflight == 0 {
			return true
		}
		select {
		case a := <-q.answers:
			q.receive(a, found)
		case <-grace:
			return false
		case <-ctx.Done():
			return false
		case <-q.ctx.Done():
			return false
		}
	}
	return false
}

// getRecord reads the value record key, whose author is host (the peer the
// key names), as a lookup does, and returns it opened by open, which
// verifies the record (its signature, its signer and the key it names)
// and decodes it in one pass: first from host itself with one DHT
// GET_VALUE request (the author stores its own records, and its copy is
// the newest), then, when host does not answer with a record that open
// accepts, from the DHT with Quorum(1), whose answer kad-dht has already
// checked with the nova validator and open checks again. dial says
// whether host may be dialled for it: a lookup's caller is about to talk
// to the host; the refresh loop only asks hosts it is already connected
// to. A record from the DHT that open refuses is counted as refused.
func getRecord[T any](ctx context.Context, s *Service, d *dht.IpfsDHT, host peer.ID, key string, dial bool, open func([]byte) (T, error)) (T, error) {
	var zero T
	if host != s.self && (dial || s.h.Network().Connectedness(host) == network.Connected) {
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		s.stats.dhtRequests.Add(1)
		rec, _, err := messenger(d).GetValue(rctx, host, key)
		cancel()
		if err == nil && rec == nil {
			err = errors.New("no record")
		}
		if err == nil {
			var t T
			if t, err = open(rec.GetValue()); err == nil {
				return t, nil
			}
		}
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		s.log.Debugw("host did not serve its record, asking the DHT", "key", key, "err", err)
	}
	s.stats.dhtQueries.Add(1)
	// kad-dht's GetValue returns at the first record (Quorum(1)) but leaves
	// the lookup's requests to other peers running until their context
	// ends, and the roster's and refresh loop's context lives as long as
	// the node: ended here, they do not pile up (9,789 of them in a
	// simulated 200-node swarm).
	gctx, cancel := context.WithCancel(ctx)
	v, err := d.GetValue(gctx, key, dht.Quorum(1))
	cancel()
	if err != nil {
		return zero, err
	}
	t, err := open(v)
	if err != nil {
		s.stats.refused.Add(1)
		s.log.Debugw("record refused", "key", key, "err", err)
		return zero, err
	}
	return t, nil
}
