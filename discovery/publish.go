package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/nova-node/nova-node/agentcard"
)

// Publish signs every local card with a new heartbeat (LastSeenAt = now,
// strictly later than the previous publish) and puts it into the DHT under
// agentcard.Key(self, id); puts this node's signed agent index under
// [IndexKey]; and provides the name key of every local agent and the
// capability key of every capability they offer. From then on the node
// serves the new index and cards on [RecordsProtocol]. PutValue is acknowledged:
// it stores the record locally and waits until each of the closest peers
// has answered or timed out. Provider records are not acknowledged, which
// is why lookups retry. A key provided for the first time is first given
// to the closest peers found within [firstProvideWait] (see provideKey),
// so that a new agent is findable before a slow lookup ends.
//
// The publish loop calls Publish on its own; call it directly to wait for
// a publish (after [Service.Announce] returns, the loop publishes soon but
// asynchronously). Publishes are serialised. The error joins every failed
// put and provide; a node without DHT peers fails with the DHT's lookup
// error, and the loop retries.
func (s *Service) Publish(ctx context.Context) error { return s.publish(ctx, true) }

// publish is [Service.Publish], sending the roster message only when
// gossip is true.
func (s *Service) publish(ctx context.Context, gossip bool) error {
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	start := time.Now()

	s.sealMu.Lock()
	own, puts, provide, errs := s.sealOwn()
	stamp := s.stamp
	s.sealMu.Unlock()
	if gossip && own.gossip != nil {
		// The roster message goes first: it reaches every member in one
		// GossipSub round, the DHT puts take their closest peers' answers.
		s.publishGossip(ctx, own.gossip)
	}
	keys := make([]string, 0, len(provide))
	for k := range provide {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	first := make([]bool, len(keys))
	for i, k := range keys {
		first[i] = !s.provided[k]
	}
	done := make([]bool, len(keys))
	forEach(len(puts)+len(keys), parallelism, func(i int) {
		s.stats.dhtWrites.Add(1)
		if i < len(puts) {
			if err := d.PutValue(ctx, puts[i].key, puts[i].value); err != nil {
				fail(fmt.Errorf("put %s: %w", puts[i].key, err))
			}
			return
		}
		i -= len(puts)
		if err := provideKey(ctx, d, keys[i], first[i]); err != nil {
			fail(fmt.Errorf("provide %s: %w", keys[i], err))
			return
		}
		done[i] = true
	})
	provided := make(map[string]bool, len(keys))
	for i, k := range keys {
		if done[i] || !first[i] {
			provided[k] = true
		}
	}
	s.provided = provided
	rt := d.RoutingTable().Size()
	s.rtAtPublish.Store(int64(rt))
	if err := errors.Join(errs...); err != nil {
		s.stats.publishFailures.Add(1)
		return fmt.Errorf("discovery: publish: %w", err)
	}
	s.stats.publishes.Add(1)
	s.log.Debugw("published", "cards", len(own.cards), "providerKeys", len(keys), "heartbeat", stamp,
		"routingTable", rt, "took", time.Since(start))
	return nil
}

// put is one DHT value record of a publish.
type put struct {
	key   string
	value []byte
}

// sealOwn seals this node's cards and agent index under a new heartbeat
// and makes them what it serves (s.own): the records to put, the keys to
// provide, and what failed to seal. Caller holds sealMu.
func (s *Service) sealOwn() (own served, puts []put, provide map[string]bool, errs []error) {
	stamp := s.cfg.now().UnixMilli()
	if stamp <= s.stamp {
		stamp = s.stamp + 1
	}
	s.stamp = stamp

	cards := s.src.Local()
	ix := Index{Host: s.self, LastSeenAt: stamp, Agents: make([]IndexEntry, 0, len(cards))}
	provide = map[string]bool{}
	for _, c := range cards {
		c.LastSeenAt = stamp
		sealed, err := agentcard.Seal(c, s.key)
		if err != nil {
			errs = append(errs, fmt.Errorf("seal %s: %w", c.ID, err))
			continue
		}
		puts = append(puts, put{agentcard.Key(s.self, c.ID), sealed})
		e := IndexEntry{ID: c.ID, Revision: c.Revision, Capabilities: make([]string, 0, len(c.Capabilities))}
		provide[NameKey(s.swarm, c.ID)] = true
		for _, cp := range c.Capabilities {
			e.Capabilities = append(e.Capabilities, cp.ID)
			provide[CapabilityKey(s.swarm, cp.ID)] = true
		}
		ix.Agents = append(ix.Agents, e)
		own.cards = append(own.cards, servedCard{caps: e.Capabilities, sealed: sealed})
	}
	if len(cards) > 0 {
		provide[MembersKey(s.swarm)] = true
	}
	if s.cfg.authPresent != nil {
		ix.Auth = fitAuth(s.cfg.authPresent())
	}
	sealedIx, err := SealIndex(ix, s.key)
	if err != nil {
		errs = append(errs, err)
		return own, puts, provide, errs
	}
	puts = append(puts, put{IndexKey(s.self), sealedIx})
	own.index = sealedIx
	own.gossip = gossipMessage(sealedIx, own.cards)
	s.own.Store(&own)
	return own, puts, provide, errs
}

// regossip seals this node's records under a new heartbeat and sends its
// roster message, without the DHT puts of a publish, unless the last one
// went out to at least [minGossipPeers] peers of the topic
// ([WithGossipPeers]): with flood publishing each of them had it at once
// and forwarded it on its mesh, so it reached the swarm, and sending it
// again would cost every member one more message for nothing. A repeat of the
// message already sent would not do: a node that holds a message ignores
// a repeat, and GossipSub forwards only what its validator accepts, so a
// repeat stops at the first node that had the original, and a member that
// missed it (its mesh had not formed) would wait for the next heartbeat.
func (s *Service) regossip(ctx context.Context) {
	if s.cfg.gossip == nil || s.own.Load() == nil {
		return // nothing published yet: the first publish sends it
	}
	if s.gossipReached() {
		s.stats.gossipSpared.Add(1)
		return // the last one went out to enough members to reach the swarm
	}
	s.sealMu.Lock()
	own, _, _, errs := s.sealOwn()
	s.sealMu.Unlock()
	if len(errs) > 0 || own.gossip == nil {
		s.log.Debugw("roster message not sealed again", "err", errors.Join(errs...))
		return
	}
	s.stats.gossipResent.Add(1)
	s.publishGossip(ctx, own.gossip)
}

// firstProvideWait bounds the closest-peers lookup of the first provide
// of a key (see provideKey). A lookup in a settled swarm ends well within
// it; one that waits on peers that left without closing their
// connections waits about 5 s for each.
const firstProvideWait = 2 * time.Second

// provider is the part of the DHT that provideKey uses.
type provider interface {
	Provide(ctx context.Context, key cid.Cid, broadcast bool) error
}

// provideKey provides key (its [KeyCID]) to the closest peers. The first
// time this node provides key since Start (first), the closest-peers
// lookup that kad-dht's Provide runs first is given [firstProvideWait]:
// when it has not ended by then, Provide hands the record to the closest
// peers it has found so far, and returns context.DeadlineExceeded; then
// the full Provide runs, so the record also reaches the peers closest to
// the key. Nobody can find a new agent before its provider records are
// stored; so its name and capabilities are findable about
// firstProvideWait after the publish starts, even while the lookup waits
// on departed peers (a swarm with churn), not only once it has ended.
// Later provides (republishes) run the full Provide alone: the records
// they renew are still held.
func provideKey(ctx context.Context, d provider, key string, first bool) error {
	c := KeyCID(key)
	if first {
		qctx, cancel := context.WithTimeout(ctx, firstProvideWait)
		err := d.Provide(qctx, c, true)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return d.Provide(ctx, c, true)
}

// fitAuth keeps, in order, the records that fit an index: each at most
// MaxIndexAuthRecord bytes, at most MaxIndexAuth of them and
// maxIndexAuthBytes in all.
func fitAuth(recs [][]byte) [][]byte {
	var out [][]byte
	total := 0
	for _, r := range recs {
		if len(r) == 0 || len(r) > MaxIndexAuthRecord || total+len(r) > maxIndexAuthBytes {
			continue
		}
		if len(out) == MaxIndexAuth {
			break
		}
		out = append(out, r)
		total += len(r)
	}
	return out
}

// forEach calls f(0) … f(n-1) on at most limit goroutines at once and
// returns when every call has returned.
func forEach(n, limit int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
