package discovery

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Roster timing that is not an option.
const (
	rosterFirst = time.Second // the first roster pass after Start; then doubling up to the roster interval
	maxMembers  = 4096        // members read per roster pass
)

// rosterLoop reads the swarm's roster (see [Service.Roster]) one second
// after Start, then after 2, 4, 8… seconds up to the roster interval, and
// every roster interval after that, until the service closes.
//
// With roster gossip ([WithGossip]) each pass first asks a connected peer
// for the roster messages it holds ([RosterProtocol]) until one answers,
// so a newcomer lists every member at once; and the second and third
// passes send this node's own roster message again under a new heartbeat
// (see [Service.regossip]), for the members whose GossipSub mesh had not
// formed when the first went out. A node that was alone (started before
// its network was up, or left with no connection) runs these passes
// again from its first connection. The DHT read
// then runs only while no peer has served its roster messages, and every
// roster interval once the passes reach it: every node provides the
// members key, so each read is a full DHT walk whose answers list up to
// every member, and a young node's passes at 1, 2, 4… s would repeat it
// for what gossip already brought.
func (s *Service) rosterLoop() {
	limit := s.cfg.roster
	if s.cfg.gossip != nil {
		// Members arrive by gossip within a second of their first publish;
		// the roster's DHT read only catches those whose messages were lost.
		limit = max(limit, s.cfg.republish)
	}
	wait := min(rosterFirst, limit)
	t := time.NewTimer(wait)
	defer t.Stop()
	synced := false
	for pass := 0; ; pass++ {
		select {
		case <-s.ctx.Done():
			return
		case <-s.joined:
			// Back among peers after none: what the swarm said meanwhile
			// was missed, and so was this node's own message.
			pass, wait, synced = -1, min(rosterFirst, limit), false
			s.gossipReach.Store(-1) // its passes send it again
			t.Reset(wait)
			continue
		case <-t.C:
		}
		if s.cfg.gossip != nil {
			if !synced {
				synced = s.syncRoster(s.ctx)
			}
			if pass == 1 || pass == 2 {
				s.regossip(s.ctx)
			}
		}
		if s.cfg.gossip == nil || !synced || wait >= limit {
			s.roster(s.ctx, s.dht)
		}
		wait = min(2*wait, limit)
		t.Reset(wait)
	}
}

// syncRoster asks connected peers, the bootstrap peers first, for the
// roster messages they hold ([RosterProtocol]), at most three, until one
// serves any (taken, or held already), and reports whether one did: a
// peer that holds none yet is asked again on the next pass.
func (s *Service) syncRoster(ctx context.Context) bool {
	var order []peer.ID
	for _, ai := range s.cfg.bootstrap {
		if s.h.Network().Connectedness(ai.ID) == network.Connected {
			order = append(order, ai.ID)
		}
	}
	for _, p := range s.h.Network().Peers() {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
	}
	for i, p := range order {
		if i == 3 {
			break
		}
		took, served, err := s.askRoster(ctx, p)
		if err != nil {
			s.log.Debugw("roster snapshot not served", "peer", p, "err", err)
			continue
		}
		s.log.Debugw("roster snapshot taken", "peer", p, "members", took, "served", served)
		if served > 0 { // what it holds is taken, or held already: in step
			return true
		}
	}
	return false
}

// Roster reads now what the roster loop reads every roster interval, and
// waits until it is done: the providers of the swarm's members key
// ([MembersKey], which every node hosting an agent provides on each
// publish), then, for every member whose cards this node has not found
// yet, its signed index and the cards it lists, verified, fresh and merged
// into the sink. From then on the refresh loop keeps them, as it keeps
// every card a lookup found. So every node lists every agent of the
// swarm, including those of nodes it never connects to, and the router's
// hellos are not the only way cards arrive. It returns an error only when
// the service is not running.
func (s *Service) Roster(ctx context.Context) error {
	d, ctx, cancel, err := s.running(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	s.roster(ctx, d)
	return nil
}

func (s *Service) roster(ctx context.Context, d *dht.IpfsDHT) {
	known := map[peer.ID]bool{}
	s.cache.mu.Lock()
	for _, e := range s.cache.cards {
		if p, err := peer.Decode(e.card.Host); err == nil {
			known[p] = true
		}
	}
	s.cache.mu.Unlock()
	var fresh []peer.ID
	ctx2, cancel := context.WithCancel(ctx)
	s.stats.dhtQueries.Add(1)
	for ai := range d.FindProvidersAsync(ctx2, KeyCID(MembersKey(s.swarm)), maxMembers) {
		if ai.ID != s.self && !known[ai.ID] {
			known[ai.ID] = true
			fresh = append(fresh, ai.ID)
		}
	}
	cancel()
	var merged atomic.Int64
	forEach(len(fresh), parallelism, func(i int) {
		p := fresh[i]
		ix, err := s.fetchIndex(ctx, d, p, false)
		if err != nil {
			s.log.Debugw("member without a usable index", "peer", p, "err", err)
			return
		}
		for _, ie := range ix.Agents {
			e, err := s.card(ctx, d, p, ie.ID, ie.Revision, false)
			if err != nil {
				s.log.Debugw("member's agent without a usable card", "agent", ie.ID, "peer", p, "err", err)
				continue
			}
			s.vouch(e, ix)
			if _, ok := s.deliver(e); ok {
				s.stats.rosterCards.Add(1)
				merged.Add(1)
			}
		}
	})
	if len(fresh) > 0 {
		s.log.Debugw("roster read", "newMembers", len(fresh), "cards", merged.Load())
	}
}
