package discovery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"

	"github.com/nova-node/nova-node/agentcard"
)

// watchFor is how many TTLs after a host's last heartbeat refresh keeps
// re-reading its cards.
const watchFor = 2

// cache holds what lookups learned: provider sets, agent indexes and
// cards. It is guarded by its own mutex, a leaf lock.
type cache struct {
	mu        sync.Mutex
	providers map[string]providerSet // provider key -> providers
	indexes   map[peer.ID]indexEntry
	cards     map[string]*cardEntry // "id@peer" -> card
	// byHost indexes cards by their host (the card's Host field), so a
	// host's roster message finds that host's cards without a walk of every
	// cached card: the walk cost every message the size of the swarm. A
	// host has few cards, so a slice each (a map of one costs a group of
	// eight slots, for every member of the swarm).
	byHost map[string][]string // host -> addresses in cards
}

// putCard caches e under addr. Callers hold mu.
func (c *cache) putCard(addr string, e *cardEntry) {
	if _, ok := c.cards[addr]; !ok {
		c.byHost[e.card.Host] = append(c.byHost[e.card.Host], addr)
	}
	c.cards[addr] = e
}

// dropCard removes the card cached under addr. Callers hold mu.
func (c *cache) dropCard(addr string) {
	e, ok := c.cards[addr]
	if !ok {
		return
	}
	delete(c.cards, addr)
	set := slices.DeleteFunc(c.byHost[e.card.Host], func(a string) bool { return a == addr })
	if len(set) == 0 {
		delete(c.byHost, e.card.Host)
	} else {
		c.byHost[e.card.Host] = set
	}
}

// clearCards drops every cached card. Callers hold mu.
func (c *cache) clearCards() {
	clear(c.cards)
	clear(c.byHost)
}

type providerSet struct {
	peers   []peer.ID
	fetched time.Time
}

type indexEntry struct {
	ix      Index
	sum     [sha256.Size]byte // of the signed index, when it was served on RecordsProtocol
	fetched time.Time
}

// cardEntry is a verified card and the latest time its host was known to be
// alive with this revision: the card's own heartbeat, or a later heartbeat
// of the host's index listing the same revision.
type cardEntry struct {
	card    agentcard.Card // as signed; never written: the sink keeps its slices
	seen    time.Time
	fetched time.Time
}

func newCache() cache {
	return cache{
		providers: map[string]providerSet{},
		indexes:   map[peer.ID]indexEntry{},
		cards:     map[string]*cardEntry{},
		byHost:    map[string][]string{},
	}
}

// heartbeat checks a signed heartbeat (unix ms) against the local clock: a
// time more than the allowed skew in the future is refused; one in the
// near future counts as now.
func (s *Service) heartbeat(ms int64, now time.Time) (time.Time, error) {
	hb := time.UnixMilli(ms)
	if hb.After(now.Add(s.cfg.skew)) {
		return time.Time{}, fmt.Errorf("heartbeat %s is %s ahead of the local clock", hb.UTC().Format(time.RFC3339), hb.Sub(now).Round(time.Second))
	}
	if hb.After(now) {
		hb = now
	}
	return hb, nil
}

func (s *Service) fresh(seen, now time.Time) bool { return now.Sub(seen) < s.cfg.ttl }

// fetchCard reads host's card id (from host itself, else from the DHT
// with Quorum(1): a stale but valid card is acceptable, and the heartbeat
// bounds its age; see getRecord for dial), verifies it (signature, signer
// = host = the key's peer, agent id = the key's) as it decodes it, checks
// its heartbeat and caches it. A lower revision than the cached one never
// replaces it.
func (s *Service) fetchCard(ctx context.Context, d *dht.IpfsDHT, host peer.ID, id string, dial bool) (*cardEntry, error) {
	key := agentcard.Key(host, id)
	c, err := getRecord(ctx, s, d, host, key, dial, func(v []byte) (agentcard.Card, error) { return openCard(host, id, v) })
	if err != nil {
		return nil, err
	}
	return s.takeCard(c)
}

// openCard verifies and decodes v as host's signed card id: the record
// stored under agentcard.Key(host, id).
func openCard(host peer.ID, id string, v []byte) (agentcard.Card, error) {
	c, signer, err := agentcard.Open(v)
	if err == nil && (signer != host || c.ID != id) {
		err = fmt.Errorf("card %s signed by %s is not %s", c.Address(), signer, agentcard.Key(host, id))
	}
	return c, err
}

// takeCard checks the heartbeat of c, a card just read and verified, and
// caches it; a lower revision than the cached one never replaces it.
func (s *Service) takeCard(c agentcard.Card) (*cardEntry, error) {
	now := s.cfg.now()
	hb, err := s.heartbeat(c.LastSeenAt, now)
	if err != nil {
		s.stats.refused.Add(1)
		s.log.Debugw("card refused", "card", c.Address(), "err", err)
		return nil, err
	}
	addr := c.Address()
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	old := s.cache.cards[addr]
	switch {
	case old == nil || c.Revision > old.card.Revision:
		e := &cardEntry{card: c, seen: hb, fetched: now}
		s.cache.putCard(addr, e)
		return e, nil
	case c.Revision == old.card.Revision:
		if hb.After(old.seen) {
			old.card, old.seen = c, hb
		}
	}
	old.fetched = now
	return old, nil
}

// card returns host's card id from the cache when it was read within the
// lookup cache TTL and has at least revision minRev, else from host or the
// DHT (fetchCard; see getRecord for dial).
func (s *Service) card(ctx context.Context, d *dht.IpfsDHT, host peer.ID, id string, minRev uint64, dial bool) (*cardEntry, error) {
	now := s.cfg.now()
	s.cache.mu.Lock()
	e := s.cache.cards[id+"@"+host.String()]
	hit := e != nil && now.Sub(e.fetched) < s.cfg.cacheTTL && e.card.Revision >= minRev
	s.cache.mu.Unlock()
	if hit {
		s.stats.cacheHits.Add(1)
		return e, nil
	}
	return s.fetchCard(ctx, d, host, id, dial)
}

// listed returns the card that ix, host's index just read, lists as ie:
// the card this node already holds when it has exactly the listed
// revision (it was verified when it was read, and the index, signed by
// the host with a fresh heartbeat, vouches that it is still current),
// else the card read again (card, with at least the listed revision).
// The index's heartbeat extends the card's freshness when the revisions
// match.
func (s *Service) listed(ctx context.Context, d *dht.IpfsDHT, host peer.ID, ix Index, ie IndexEntry, dial bool) (*cardEntry, error) {
	s.cache.mu.Lock()
	e := s.cache.cards[ie.ID+"@"+host.String()]
	held := e != nil && e.card.Revision == ie.Revision
	s.cache.mu.Unlock()
	if held {
		s.stats.cacheHits.Add(1)
	} else {
		var err error
		if e, err = s.card(ctx, d, host, ie.ID, ie.Revision, dial); err != nil {
			return nil, err
		}
	}
	s.vouch(e, ix)
	return e, nil
}

// holds reports whether this node holds host's card ie.ID at the
// revision ie lists.
func (s *Service) holds(host peer.ID, ie IndexEntry) bool {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	e := s.cache.cards[ie.ID+"@"+host.String()]
	return e != nil && e.card.Revision == ie.Revision
}

// fetchIndex reads host's agent index (from host itself, else from the
// DHT; see getRecord for dial), verifies it as it decodes it, checks its
// heartbeat and caches it.
func (s *Service) fetchIndex(ctx context.Context, d *dht.IpfsDHT, host peer.ID, dial bool) (Index, error) {
	key := IndexKey(host)
	ix, err := getRecord(ctx, s, d, host, key, dial, func(v []byte) (Index, error) { return validateIndex(key, v) })
	if err != nil {
		return Index{}, err
	}
	return s.takeIndex(host, ix, [sha256.Size]byte{})
}

// takeIndex checks the heartbeat of ix, host's index just read and
// verified (sum is the SHA-256 of its signed bytes, or zero), caches it
// and hands its authority records on.
func (s *Service) takeIndex(host peer.ID, ix Index, sum [sha256.Size]byte) (Index, error) {
	now := s.cfg.now()
	if _, err := s.heartbeat(ix.LastSeenAt, now); err != nil {
		s.stats.refused.Add(1)
		return Index{}, err
	}
	s.cache.mu.Lock()
	if old, ok := s.cache.indexes[host]; ok && old.ix.LastSeenAt > ix.LastSeenAt {
		ix, sum = old.ix, old.sum
	}
	s.cache.indexes[host] = indexEntry{ix: ix, sum: sum, fetched: now}
	s.cache.mu.Unlock()
	if s.cfg.authAccept != nil && len(ix.Auth) > 0 {
		s.cfg.authAccept(host, ix.Auth)
	}
	return ix, nil
}

// index returns host's agent index from the cache, else from host or the
// DHT (fetchIndex, dialling host).
func (s *Service) index(ctx context.Context, d *dht.IpfsDHT, host peer.ID) (Index, error) {
	now := s.cfg.now()
	s.cache.mu.Lock()
	e, ok := s.cache.indexes[host]
	s.cache.mu.Unlock()
	if ok && now.Sub(e.fetched) < s.cfg.cacheTTL {
		s.stats.cacheHits.Add(1)
		return e.ix, nil
	}
	return s.fetchIndex(ctx, d, host, true)
}

// vouch extends a card's seen time with its host's index heartbeat, when
// the index lists the card's revision, and returns the result.
func (s *Service) vouch(e *cardEntry, ix Index) time.Time {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if ie, ok := ix.Entry(e.card.ID); ok && ie.Revision == e.card.Revision && ix.Host.String() == e.card.Host {
		if hb, err := s.heartbeat(ix.LastSeenAt, s.cfg.now()); err == nil && hb.After(e.seen) {
			e.seen = hb
		}
	}
	return e.seen
}

// deliver hands a fresh card to the sink and reports whether it was fresh.
func (s *Service) deliver(e *cardEntry) (agentcard.Card, bool) {
	s.cache.mu.Lock()
	c, seen := e.card, e.seen
	s.cache.mu.Unlock()
	if !s.fresh(seen, s.cfg.now()) {
		return agentcard.Card{}, false
	}
	if _, err := s.sink.MergeRemoteAtShared(c, seen); err != nil {
		s.log.Debugw("sink refused card", "agent", c.Address(), "err", err)
		return agentcard.Card{}, false
	}
	s.stats.merged.Add(1)
	return c, true
}

// cachedProviders returns the providers of key that gave cards within
// the lookup cache TTL.
func (s *Service) cachedProviders(key string) ([]peer.ID, bool) {
	s.cache.mu.Lock()
	e, ok := s.cache.providers[key]
	s.cache.mu.Unlock()
	if !ok || s.cfg.now().Sub(e.fetched) >= s.cfg.cacheTTL {
		return nil, false
	}
	s.stats.cacheHits.Add(1)
	return e.peers, true
}

// fullProviders is kad-dht's own provider lookup: it runs until the
// closest peers to the key have all answered (or maxProviders providers
// are found), calling found for each provider as it arrives.
func (s *Service) fullProviders(ctx context.Context, d *dht.IpfsDHT, key string, found func(peer.AddrInfo)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stats.dhtQueries.Add(1)
	for ai := range d.FindProvidersAsync(ctx, KeyCID(key), maxProviders) {
		found(ai)
	}
}

// resolveAll runs query, which calls found for each provider it finds,
// and resolves every provider other than this node to cards as soon as it
// is found (at most parallelism at once); it waits for both, then merges
// the fresh cards into the sink. It returns them, sorted by address, and
// the providers.
func (s *Service) resolveAll(ctx context.Context, query func(found func(peer.AddrInfo)), resolve func(context.Context, peer.ID) []*cardEntry) ([]agentcard.Card, []peer.ID) {
	var mu sync.Mutex
	var entries []*cardEntry
	var provs []peer.ID // touched only by found, on query's goroutine, until wg.Wait
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelism)
	query(func(ai peer.AddrInfo) {
		if ai.ID == s.self || slices.Contains(provs, ai.ID) || len(provs) >= maxProviders {
			return
		}
		provs = append(provs, ai.ID)
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			es := resolve(ctx, ai.ID)
			mu.Lock()
			entries = append(entries, es...)
			mu.Unlock()
		})
	})
	wg.Wait()
	var cards []agentcard.Card
	for _, e := range entries {
		if c, ok := s.deliver(e); ok {
			// The cache and the sink share c's slices: the caller gets
			// its own.
			cards = append(cards, c.Clone())
		}
	}
	slices.SortFunc(cards, func(a, b agentcard.Card) int { return strings.Compare(a.Address(), b.Address()) })
	return cards, provs
}

// find looks up the providers of key and resolves each one to cards,
// merging the cards it returns into the sink, sorted by address. The
// first attempt reads the providers that gave cards within the lookup
// cache TTL, else asks the DHT with a quorum query (quickProviders:
// quorum of the closest peers agree), and resolves each provider the
// moment it is found; when that gives no card,
// it runs kad-dht's full provider lookup before answering, so a peer that
// answers fast with nothing valid cannot hide a name. Later attempts
// (WithRetry), after a backoff, run the full lookup again: provider
// records are not acknowledged.
func (s *Service) find(ctx context.Context, d *dht.IpfsDHT, key string, quorum int, resolve func(context.Context, peer.ID) []*cardEntry) ([]agentcard.Card, int, error) {
	s.stats.lookups.Add(1)
	if d.RoutingTable().Size() == 0 {
		// A node that has just started: wait for its bootstrap dials
		// rather than fail with an empty routing table.
		select {
		case <-s.booted:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	var nprov int
	for attempt := 0; ; attempt++ {
		var cards []agentcard.Card
		var provs []peer.ID
		if attempt == 0 {
			if cached, ok := s.cachedProviders(key); ok {
				cards, provs = s.resolveAll(ctx, func(found func(peer.AddrInfo)) {
					for _, p := range cached {
						found(peer.AddrInfo{ID: p})
					}
				}, resolve)
			}
			if len(cards) == 0 && ctx.Err() == nil {
				cards, provs = s.resolveAll(ctx, func(found func(peer.AddrInfo)) {
					s.quickProviders(ctx, d, key, quorum, found)
				}, resolve)
			}
		}
		if len(cards) == 0 && ctx.Err() == nil {
			cards, provs = s.resolveAll(ctx, func(found func(peer.AddrInfo)) {
				s.fullProviders(ctx, d, key, found)
			}, resolve)
		}
		nprov = max(nprov, len(provs))
		if len(cards) > 0 {
			s.cache.mu.Lock()
			s.cache.providers[key] = providerSet{peers: provs, fetched: s.cfg.now()}
			s.cache.mu.Unlock()
			return cards, nprov, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, nprov, err
		}
		if attempt >= s.cfg.retries {
			return nil, nprov, nil
		}
		t := time.NewTimer(s.cfg.retryBase << attempt)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nprov, ctx.Err()
		case <-t.C:
		}
	}
}

// FindByName finds the agents named name (a card id) hosted by other
// nodes of the swarm: the providers of [NameKey], then each provider's card
// agentcard.Key(provider, name). Every card is verified (signature, host =
// signer = the key's peer), must have a heartbeat younger than the TTL, and
// is merged into the sink. When nothing is found the lookup is retried
// with backoff ([WithRetry]); provider sets that gave cards are cached for
// the lookup cache TTL. The result is sorted by address and never holds
// this node's own cards (they are in the registry already). None found is
// an *agentcard.NotFoundError (code AGENT_NOT_FOUND).
func (s *Service) FindByName(ctx context.Context, name string) ([]agentcard.Card, error) {
	if _, host, err := agentcard.SplitAddress(name); err != nil || host != "" {
		return nil, &agentcard.AddressError{Address: name, Reason: "FindByName takes a bare agent id; use Lookup for name@peer"}
	}
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cards, nprov, err := s.find(ctx, d, NameKey(s.swarm, name), providerQuorum, func(ctx context.Context, p peer.ID) []*cardEntry {
		if s.cfg.authAccept != nil {
			// The host's index carries its grants: read it beside the
			// card (no added latency), so the card is assessed with them.
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = s.index(ctx, d, p) })
			defer wg.Wait()
		}
		e, err := s.card(ctx, d, p, name, 0, true)
		if err != nil {
			s.log.Debugw("provider without a usable card", "agent", name, "peer", p, "err", err)
			return nil
		}
		return []*cardEntry{e}
	})
	if err != nil {
		return nil, fmt.Errorf("discovery: find %q: %w", name, err)
	}
	if len(cards) == 0 {
		return nil, &agentcard.NotFoundError{Query: name, Where: s.where(nprov)}
	}
	return cards, nil
}

// FindByCapability finds the agents of other nodes that offer capability
// capID: the providers of [CapabilityKey], then each provider's agent index
// for the agents listing capID, then their cards, verified, fresh and
// merged as in [Service.FindByName]. The card decides: an agent whose card
// lacks capID is left out whatever its index says. None found is an
// *agentcard.CapabilityNotFoundError (code CAPABILITY_NOT_FOUND).
func (s *Service) FindByCapability(ctx context.Context, capID string) ([]agentcard.Card, error) {
	if capID == "" || len(capID) > maxCapIDLen {
		return nil, &agentcard.CapabilityNotFoundError{Capability: capID, Where: "nowhere: not a capability id"}
	}
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cards, nprov, err := s.find(ctx, d, CapabilityKey(s.swarm, capID), capabilityQuorum, func(ctx context.Context, p peer.ID) []*cardEntry {
		return s.offering(ctx, d, p, capID)
	})
	if err != nil {
		return nil, fmt.Errorf("discovery: find capability %q: %w", capID, err)
	}
	if len(cards) == 0 {
		return nil, &agentcard.CapabilityNotFoundError{Capability: capID, Where: s.where(nprov)}
	}
	return cards, nil
}

// offering resolves p, a provider of capability capID, to the cards of
// its agents that offer it. It reads p's index (from the cache within the
// lookup cache TTL), and with it the cards p serves for capID, in one
// round trip on [RecordsProtocol]; a host that does not speak it has its
// index read with a DHT GET_VALUE instead. Of the agents the index lists
// with capID, a card this node holds at the listed revision is taken as
// held ([Service.listed]); a card p served is verified as one read from
// the DHT is; any other is read with GET_VALUE. The card decides: one
// that lacks capID is left out.
func (s *Service) offering(ctx context.Context, d *dht.IpfsDHT, p peer.ID, capID string) []*cardEntry {
	now := s.cfg.now()
	s.cache.mu.Lock()
	ie, cached := s.cache.indexes[p]
	s.cache.mu.Unlock()
	ix := ie.ix
	var sent [][]byte
	if cached && now.Sub(ie.fetched) < s.cfg.cacheTTL {
		s.stats.cacheHits.Add(1)
	} else {
		var err error
		ix, sent, err = s.askIndex(ctx, p, capID)
		if err != nil {
			s.log.Debugw("provider did not serve its records, reading them with GET_VALUE", "capability", capID, "peer", p, "err", err)
			if ix, err = s.fetchIndex(ctx, d, p, true); err != nil {
				s.log.Debugw("provider without a usable index", "capability", capID, "peer", p, "err", err)
				return nil
			}
		}
	}
	var out []*cardEntry
	k := 0 // the served card of the next agent listing capID
	for _, ie := range ix.Agents {
		if !slices.Contains(ie.Capabilities, capID) {
			continue
		}
		var v []byte
		if k < len(sent) {
			v = sent[k]
		}
		k++
		e, err := s.listedOrSent(ctx, d, p, ix, ie, v)
		if err != nil {
			s.log.Debugw("indexed agent without a usable card", "agent", ie.ID, "peer", p, "err", err)
			continue
		}
		if e.card.HasCapability(capID) {
			out = append(out, e)
		}
	}
	return out
}

// askIndex reads p's index and the cards it serves for capID on
// [RecordsProtocol], checks the index (openServedIndex: p itself sent
// it, so its signature is not verified) and takes it (takeIndex); the
// cards are returned unchecked, in the order of the agents the index
// lists with capID. An index with the same bytes as the one this node
// holds for p (a host re-signs its index only when it republishes) is
// not decoded again.
func (s *Service) askIndex(ctx context.Context, p peer.ID, capID string) (Index, [][]byte, error) {
	v, sent, err := s.askRecords(ctx, p, capID)
	if err != nil {
		return Index{}, nil, err
	}
	sum := sha256.Sum256(v)
	s.cache.mu.Lock()
	held, ok := s.cache.indexes[p]
	s.cache.mu.Unlock()
	ix := held.ix
	if !ok || held.sum != sum {
		if ix, err = openServedIndex(p, v); err != nil {
			return Index{}, nil, err
		}
	}
	ix, err = s.takeIndex(p, ix, sum)
	return ix, sent, err
}

// listedOrSent is [Service.listed] with v, the card host served for ie
// (nil when it served none): a held card at the listed revision first,
// then v when it verifies as host's card ie.ID at the listed revision or
// later, then a GET_VALUE read.
func (s *Service) listedOrSent(ctx context.Context, d *dht.IpfsDHT, host peer.ID, ix Index, ie IndexEntry, v []byte) (*cardEntry, error) {
	if v != nil && !s.holds(host, ie) {
		c, err := openCard(host, ie.ID, v)
		if err == nil && c.Revision < ie.Revision {
			err = fmt.Errorf("served card %s is at revision %d, the index lists %d", c.Address(), c.Revision, ie.Revision)
		}
		if err == nil {
			e, err := s.takeCard(c)
			if err != nil {
				return nil, err
			}
			s.vouch(e, ix)
			return e, nil
		}
		s.log.Debugw("served card refused, reading it with GET_VALUE", "agent", ie.ID, "peer", host, "err", err)
	}
	return s.listed(ctx, d, host, ix, ie, true)
}

// Lookup reads the card at an exact address "name@peerID" from the DHT
// (or the lookup cache), verifies it, checks its heartbeat and merges it
// into the sink. An address of this node returns the local card from the
// source. A bare name is an *agentcard.AddressError; a card that is absent
// or stale is an *agentcard.NotFoundError.
func (s *Service) Lookup(ctx context.Context, addr string) (agentcard.Card, error) {
	id, host, err := agentcard.SplitAddress(addr)
	if err != nil {
		return agentcard.Card{}, err
	}
	if host == "" {
		return agentcard.Card{}, &agentcard.AddressError{Address: addr, Reason: "Lookup needs name@peerID; use FindByName for a bare name"}
	}
	if host == s.self {
		for _, c := range s.src.Local() {
			if c.ID == id {
				return c, nil
			}
		}
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: "this node's local cards"}
	}
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return agentcard.Card{}, err
	}
	defer cancel()
	s.stats.lookups.Add(1)
	e, err := s.card(ctx, d, host, id, 0, true)
	switch {
	case errors.Is(err, routing.ErrNotFound):
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("DHT of swarm %q: no record", s.swarm)}
	case ctx.Err() != nil:
		return agentcard.Card{}, fmt.Errorf("discovery: lookup %s: %w", addr, ctx.Err())
	case err != nil:
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("DHT of swarm %q: %v", s.swarm, err)}
	}
	c, ok := s.deliver(e)
	if !ok {
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("DHT of swarm %q: only a card older than the TTL (%s)", s.swarm, s.cfg.ttl)}
	}
	return c.Clone(), nil // the cache and the sink share c's slices
}

func (s *Service) where(nprov int) string {
	if nprov == 1 {
		return fmt.Sprintf("DHT of swarm %q: 1 provider, no fresh valid card", s.swarm)
	}
	return fmt.Sprintf("DHT of swarm %q: %d providers, no fresh valid card", s.swarm, nprov)
}

// Refresh re-reads now what the refresh loop re-reads every refresh
// interval (see below), and waits until it is done. It returns an error
// only when the service is not running.
func (s *Service) Refresh(ctx context.Context) error {
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	s.refresh(ctx, d)
	return nil
}

// refresh re-reads what this node has found: for every host with a fresh
// cached card, its agent index, then each listed agent's card (read again
// only when the index lists a new revision; otherwise the index's
// heartbeat vouches for the cached card), and merges the fresh ones into
// the sink. A host without a readable index has its cached cards read one
// by one. Only cards with a heartbeat younger than the TTL reach the sink,
// so a host that stopped publishing leaves it one TTL after its last
// heartbeat. A host is still re-read for [watchFor] TTLs after its last
// heartbeat, so one that comes back from a partition returns without a
// new lookup; then its cards are dropped from the cache.
func (s *Service) refresh(ctx context.Context, d *dht.IpfsDHT) {
	now := s.cfg.now()
	hosts := map[peer.ID][]string{}
	skipped := 0
	s.cache.mu.Lock()
	for addr, e := range s.cache.cards {
		if now.Sub(e.seen) >= watchFor*s.cfg.ttl {
			s.cache.dropCard(addr)
			continue
		}
		if p, err := peer.Decode(e.card.Host); err == nil {
			hosts[p] = append(hosts[p], e.card.ID)
		}
	}
	for k, e := range s.cache.providers {
		if now.Sub(e.fetched) >= s.cfg.cacheTTL {
			delete(s.cache.providers, k)
		}
	}
	for p, e := range s.cache.indexes {
		if _, ok := hosts[p]; !ok && now.Sub(e.fetched) >= s.cfg.cacheTTL {
			delete(s.cache.indexes, p)
		}
	}
	if s.cfg.gossip != nil {
		// A host whose roster message came within half the TTL needs no
		// read: it vouched for its cards then, and its next message comes
		// well before they go stale.
		for p := range hosts {
			if e, ok := s.cache.indexes[p]; ok && now.Sub(time.UnixMilli(e.ix.LastSeenAt)) < s.cfg.ttl/2 {
				delete(hosts, p)
				skipped++
			}
		}
	}
	s.cache.mu.Unlock()

	list := make([]peer.ID, 0, len(hosts))
	for p := range hosts {
		list = append(list, p)
	}
	forEach(len(list), parallelism, func(i int) {
		p := list[i]
		ix, err := s.fetchIndex(ctx, d, p, false)
		if err != nil {
			for _, id := range hosts[p] {
				if e, err := s.fetchCard(ctx, d, p, id, false); err == nil {
					s.deliver(e)
				}
			}
			return
		}
		for _, ie := range ix.Agents {
			addr := ie.ID + "@" + p.String()
			s.cache.mu.Lock()
			e := s.cache.cards[addr]
			current := e != nil && e.card.Revision >= ie.Revision
			s.cache.mu.Unlock()
			if !current {
				if e, err = s.fetchCard(ctx, d, p, ie.ID, false); err != nil {
					continue
				}
			}
			s.vouch(e, ix)
			s.deliver(e)
		}
	})
	if len(list) > 0 || skipped > 0 {
		s.log.Debugw("refreshed", "hosts", len(list), "vouchedByGossip", skipped)
	}
}
