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
	mh := KeyCID(key).Hash()
	target := kb.ConvertKey(string(mh))
	pm := messenger(d)
	ps := s.h.Peerstore()

	seen := map[peer.ID]bool{}
	withProviders := 0
	take := func(provs []peer.AddrInfo) {
		n := 0
		for _, ai := range provs {
			if ai.ID == "" {
				continue
			}
			n++
			if ai.ID == s.self || seen[ai.ID] {
				continue
			}
			seen[ai.ID] = true
			if len(ai.Addrs) > 0 {
				ps.AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			}
			found(ai)
		}
		if n > 0 {
			withProviders++
		}
	}
	if local, err := d.ProviderStore().GetProviders(ctx, mh); err == nil {
		take(local)
	}

	type state uint8
	const (
		heard state = iota
		waiting
		answered
		failed
	)
	peers := map[peer.ID]state{}
	var order []peer.ID // every peer heard of, closest to the key first
	add := func(p peer.ID) {
		if p == s.self || p == "" {
			return
		}
		if _, ok := peers[p]; ok {
			return
		}
		peers[p] = heard
		order = append(order, p)
	}
	for _, p := range d.RoutingTable().NearestPeers(target, queryK) {
		add(p)
	}
	if len(order) < queryK {
		// A node that has just started has connections (its bootstrap
		// peers) before identify has put them in its routing table.
		for _, p := range s.h.Network().Peers() {
			add(p)
		}
	}
	order = kb.SortClosestPeers(order, target)

	type answer struct {
		from          peer.ID
		provs, closer []*peer.AddrInfo
		err           error
	}
	qctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	answers := make(chan answer)
	inflight := 0
	start := time.Now()
	var grace <-chan time.Time // armed by the first answer with providers
	for withProviders < quorum {
		if withProviders > 0 && grace == nil {
			t := time.NewTimer(max(quorumGrace, 3*time.Since(start)))
			defer t.Stop()
			grace = t.C
		}
		for i := 0; i < len(order) && i < queryK && inflight < queryAlpha; i++ {
			p := order[i]
			if peers[p] != heard {
				continue
			}
			peers[p] = waiting
			inflight++
			wg.Go(func() {
				rctx, rcancel := context.WithTimeout(qctx, rpcTimeout)
				s.stats.dhtRequests.Add(1)
				provs, closer, err := pm.GetProviders(rctx, p, mh)
				rcancel()
				select {
				case answers <- answer{p, provs, closer, err}:
				case <-qctx.Done():
				}
			})
		}
		if inflight == 0 {
			break // the closest peers known have all answered or failed
		}
		var a answer
		select {
		case a = <-answers:
		case <-grace:
			return withProviders
		case <-ctx.Done():
			return withProviders
		}
		inflight--
		if a.err != nil {
			peers[a.from] = failed
			continue
		}
		peers[a.from] = answered
		provs := make([]peer.AddrInfo, 0, len(a.provs))
		for _, ai := range a.provs {
			if ai != nil {
				provs = append(provs, *ai)
			}
		}
		take(provs)
		grew := false
		for _, ai := range a.closer {
			if ai == nil || ai.ID == s.self {
				continue
			}
			if _, ok := peers[ai.ID]; ok {
				continue
			}
			if len(ai.Addrs) > 0 {
				ps.AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			}
			add(ai.ID)
			grew = true
		}
		if grew {
			order = kb.SortClosestPeers(order, target)
		}
	}
	return withProviders
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
