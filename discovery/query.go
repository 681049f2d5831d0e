package discovery

import (
	"context"
	"errors"
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
	// providerQuorum is how many peers must have answered a provider
	// query with providers before it stops. Every honest peer among the
	// closest holds every provider that reached it, so two answers give
	// the whole set unless both come from peers that missed a provide.
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
	// three times what the first answer took, whichever is more. A closest
	// peer that left without closing its connection (a laptop asleep)
	// would otherwise hold the lookup for rpcTimeout; the providers
	// already found are being resolved meanwhile, and a lookup that gets
	// no card from them runs the full query.
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

// quickProviders is a Kademlia lookup of key's providers (the iterative
// GET_PROVIDERS of kad-dht's FindProvidersAsync) that stops as soon as
// quorum peers ([providerQuorum], [capabilityQuorum]) have answered with providers, instead of running
// on until the closest peers have all answered. It asks up to
// [queryAlpha] peers at once, starting from the routing table's peers
// closest to the key and moving to the closer peers they name, among the
// [queryK] closest it has heard of; it also ends when those have all
// answered or failed. This node's own provider store counts as one
// answer. Once one peer answered with providers, the others have
// [quorumGrace] (or three times the first answer's wait) to complete the
// quorum. found is called on the query's goroutine for every new provider
// other than this node, as soon as it arrives, with the addresses the
// answering peer gave (also added to the peerstore for a while, as
// kad-dht does). It returns how many peers answered with providers.
func (s *Service) quickProviders(ctx context.Context, d *dht.IpfsDHT, key string, quorum int, found func(peer.AddrInfo)) int {
	q := s.providerQuery(ctx, d, key, quorum)
	defer q.close()
	q.run(ctx, found)
	return q.withProviders
}

// providerQuery returns the provider query of key (see quickProviders)
// on d: this node's provider store, the peers of its routing table
// closest to the key (or, while that holds fewer than [queryK], every
// peer it is connected to), and GET_PROVIDERS requests on d's message
// sender. Its requests end with life.
func (s *Service) providerQuery(life context.Context, d *dht.IpfsDHT, key string, quorum int) *providerQuery {
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

// providerQuery is the state of one provider query (see quickProviders):
// the peers heard of, closest to the key first, and what each did. Its
// I/O goes through two functions, so that its rules are tested on fake
// time: ask sends one GET_PROVIDERS request, learn keeps the addresses an
// answer gave for a peer or a provider. Its requests run on goroutines of
// its own, which close ends and waits for.
type providerQuery struct {
	self   peer.ID
	target kb.ID
	quorum int
	local  []peer.AddrInfo // this node's own provider store
	ask    func(ctx context.Context, p peer.ID) (provs, closer []*peer.AddrInfo, err error)
	learn  func(peer.AddrInfo)

	ctx     context.Context // the requests'; cancelled by close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	answers chan providerAnswer

	peers         map[peer.ID]peerState
	order         []peer.ID // every peer heard of, closest to the key first
	seen          map[peer.ID]bool
	withProviders int // answers that named providers
	inflight      int
	start         time.Time
}

// newProviderQuery returns the provider query of the key whose multihash
// is mh, from this node self: local is what its own provider store holds,
// start the peers to ask first. Its requests end with life or close.
func newProviderQuery(life context.Context, self peer.ID, mh []byte, quorum int, local []peer.AddrInfo, start []peer.ID,
	ask func(ctx context.Context, p peer.ID) ([]*peer.AddrInfo, []*peer.AddrInfo, error), learn func(peer.AddrInfo)) *providerQuery {
	ctx, cancel := context.WithCancel(life)
	q := &providerQuery{
		self: self, target: kb.ConvertKey(string(mh)), quorum: quorum, local: local, ask: ask, learn: learn,
		ctx: ctx, cancel: cancel, answers: make(chan providerAnswer),
		peers: map[peer.ID]peerState{}, seen: map[peer.ID]bool{},
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

// take reports the providers of one answer (this node's store's, or a
// peer's) through found, each once, this node left out.
func (q *providerQuery) take(provs []peer.AddrInfo, found func(peer.AddrInfo)) {
	n := 0
	for _, ai := range provs {
		if ai.ID == "" {
			continue
		}
		n++
		if ai.ID == q.self || q.seen[ai.ID] {
			continue
		}
		q.seen[ai.ID] = true
		q.learn(ai)
		found(ai)
	}
	if n > 0 {
		q.withProviders++
	}
}

// run takes this node's own providers, then asks peers until quorum
// answers named providers, the grace after the first ran out, ctx ended,
// or the closest peers all answered or failed; only then it reports the
// query complete. found is called on run's goroutine.
func (q *providerQuery) run(ctx context.Context, found func(peer.AddrInfo)) (complete bool) {
	q.start = time.Now()
	q.take(q.local, found)
	var grace <-chan time.Time // armed by the first answer with providers
	for q.withProviders < q.quorum {
		if q.withProviders > 0 && grace == nil {
			t := time.NewTimer(max(quorumGrace, 3*time.Since(q.start)))
			defer t.Stop()
			grace = t.C
		}
		for i := 0; i < len(q.order) && i < queryK && q.inflight < queryAlpha; i++ {
			p := q.order[i]
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
		if q.inflight == 0 {
			return true // the closest peers known have all answered or failed
		}
		var a providerAnswer
		select {
		case a = <-q.answers:
		case <-grace:
			return false
		case <-ctx.Done():
			return false
		}
		q.inflight--
		if a.err != nil {
			q.peers[a.from] = failed
			continue
		}
		q.peers[a.from] = answered
		provs := make([]peer.AddrInfo, 0, len(a.provs))
		for _, ai := range a.provs {
			if ai != nil {
				provs = append(provs, *ai)
			}
		}
		q.take(provs, found)
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
