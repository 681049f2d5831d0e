package discovery

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/agentcard"
)

// RosterTopic returns the publish/subscribe topic that carries the roster
// of swarm: "nova/<swarm>/roster". Every node publishes its signed index
// and cards on it ([WithGossip]) and takes those of every other member
// ([Service.TakeGossip]).
func RosterTopic(swarm string) string { return "nova/" + swarm + "/roster" }

// Roster gossip bounds that are not options.
const (
	// MaxGossipSize bounds one roster message: the signed index
	// ([MaxIndexSize] at most), then as many of the host's signed cards,
	// in the order of the index, as fit. A card left out is read from the
	// DHT by the nodes that do not hold it at the listed revision.
	MaxGossipSize = 512 << 10
	// gossipBurst and gossipRefill are the per-author rate of roster
	// messages taken: a burst of gossipBurst, then one per gossipRefill
	// (or a quarter of this node's republish interval, when shorter: a
	// swarm shares its timing). A host sends one per publish (its
	// heartbeat, every republish interval, and after each change of its
	// cards, coalesced); every message is a full statement, so one
	// dropped past the rate is made good by the next.
	gossipBurst  = 4
	paceBurst    = gossipBurst - 1 // what this node allows itself
	gossipRefill = 10 * time.Second
	// maxGossipAuthors bounds the authors whose rate this node tracks:
	// the roster's maxMembers. Authors silent for two TTLs leave first; a
	// new author past the bound is ignored until one does.
	maxGossipAuthors = maxMembers
	// maxFetchQueue bounds the hosts whose cards wait to be read from the
	// DHT because their roster message did not carry them.
	maxFetchQueue = maxMembers
)

// ErrGossipIgnored is returned by [Service.TakeGossip] for a roster message
// that is valid as far as it was read but brings nothing: this node's own,
// one older than the index held for its author, one past its author's rate,
// or one whose heartbeat is ahead of the local clock. A GossipSub
// validator answers it with ValidationIgnore: the forwarder is not to
// blame.
var ErrGossipIgnored = errors.New("discovery: roster message ignored")

// GossipError is a roster message refused because its author lied: a
// message that does not decode, an index not signed by the message's
// author, or a card that is not the author's card at the revision its
// index lists. Its code is INVALID_CARD; a GossipSub validator answers it
// with ValidationReject, and the service reports it as a [SecurityEvent].
type GossipError struct {
	Peer   peer.ID // the message's author
	Reason string
}

func (e *GossipError) Error() string {
	return fmt.Sprintf("discovery: roster message from %s refused: %s", e.Peer, e.Reason)
}

// Code returns agentcard.CodeInvalidCard.
func (e *GossipError) Code() string { return agentcard.CodeInvalidCard }

// Is makes a GossipError match agentcard.ErrInvalidCard.
func (e *GossipError) Is(target error) bool { return target == agentcard.ErrInvalidCard }

// SecurityEvent is what [WithSecurityEvents] is told when a peer is
// caught lying: Code is a seed error code, Peer the liar, Detail what it
// sent.
type SecurityEvent struct {
	Code   string
	Peer   peer.ID
	Detail string
}

// gossipState is what the service keeps per roster author: its rate
// bucket and when it last sent.
type gossipState struct {
	tokens float64
	last   time.Time
}

// gossip is the roster gossip's per-author state and the queue of hosts
// whose cards are to be read from the DHT; guarded by its own mutex, a
// leaf lock.
type gossip struct {
	mu        sync.Mutex
	authors   map[peer.ID]*gossipState
	pending   map[peer.ID]bool      // hosts whose listed cards the fetch loop reads
	held      map[peer.ID][]byte    // the latest roster message taken per author, served on RosterProtocol
	heldBytes int                   // of held
	served    map[peer.ID]time.Time // when each peer was last served a snapshot
	wake      chan struct{}         // capacity 1: the fetch loop has work
}

func newGossip() gossip {
	return gossip{authors: map[peer.ID]*gossipState{}, pending: map[peer.ID]bool{}, held: map[peer.ID][]byte{},
		served: map[peer.ID]time.Time{}, wake: make(chan struct{}, 1)}
}

// allow takes one token from from's rate bucket and reports whether there
// was one.
func (g *gossip) allow(from peer.ID, now time.Time, refill, forget time.Duration) bool {
	return g.allowBurst(from, now, gossipBurst, refill, forget)
}

// allowBurst is allow with a burst of burst tokens.
func (g *gossip) allowBurst(from peer.ID, now time.Time, burst float64, refill, forget time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.authors[from]
	if st == nil {
		if len(g.authors) >= maxGossipAuthors {
			for p, o := range g.authors {
				if now.Sub(o.last) >= forget {
					delete(g.authors, p)
					g.heldBytes -= len(g.held[p])
					delete(g.held, p)
				}
			}
			if len(g.authors) >= maxGossipAuthors {
				return false
			}
		}
		st = &gossipState{tokens: burst, last: now}
		g.authors[from] = st
	}
	st.tokens = min(burst, st.tokens+now.Sub(st.last).Seconds()/refill.Seconds())
	st.last = now
	if st.tokens < 1 {
		return false
	}
	st.tokens--
	return true
}

// gossipMessage encodes a roster message: a uvarint count of records, then
// each as a uvarint length and its bytes: the signed index, then the
// signed cards in the order of the index, as many as fit [MaxGossipSize].
func gossipMessage(index []byte, cards []servedCard) []byte {
	n := 1
	size := binary.MaxVarintLen64 + binary.MaxVarintLen64 + len(index)
	for _, c := range cards {
		add := binary.MaxVarintLen64 + len(c.sealed)
		if n > maxServedCards || size+add > MaxGossipSize {
			break
		}
		size += add
		n++
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	_, _ = w.Write(binary.AppendUvarint(nil, uint64(n)))
	_ = writeFrame(w, index)
	for _, c := range cards[:n-1] {
		_ = writeFrame(w, c.sealed)
	}
	_ = w.Flush()
	return buf.Bytes()
}

// TakeGossip takes a roster message published by from (the message's
// author, as GossipSub's signature proves it): call it from the roster
// topic's validator and answer nil with ValidationAccept, an error that
// matches [ErrGossipIgnored] with ValidationIgnore and any other error
// with ValidationReject. It never blocks on the network.
//
// The message's index must be signed by from (it is verified, unless it
// has the same bytes as the index held for from), with a heartbeat newer
// than the index held for from; each card it carries must be from's card
// of the agent at the same position in the index, at the revision the
// index lists. A card this node holds at that revision is not verified
// again: the index vouches for it. Then, as for an index a lookup reads,
// the index is cached and its authority records handed on, every listed
// card's heartbeat is extended to the index's and the fresh cards merged
// into the sink; the cards of from that the index no longer lists leave
// the cache, and the sink's too when it has RetainPeer (as
// *agentcard.Registry does). Listed cards that the message did not carry
// and this node does not hold are read from the DHT soon after, on the
// service's own goroutine. A lie is a [*GossipError] and a
// [SecurityEvent].
func (s *Service) TakeGossip(from peer.ID, data []byte) error {
	if from == s.self {
		return nil
	}
	now := s.cfg.now()
	if !s.gossip.allow(from, now, s.gossipRefill(), watchFor*s.cfg.ttl) {
		s.stats.gossipIgnored.Add(1)
		return fmt.Errorf("%w: past the rate of %s", ErrGossipIgnored, from)
	}
	if len(data) > MaxGossipSize {
		return s.lie(from, fmt.Sprintf("message of %d bytes, more than %d", len(data), MaxGossipSize))
	}
	rawIx, rawCards, err := readRecords(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		return s.lie(from, "message does not decode: "+err.Error())
	}
	sum := sha256.Sum256(rawIx)
	s.cache.mu.Lock()
	held, ok := s.cache.indexes[from]
	s.cache.mu.Unlock()
	if ok && held.sum == sum {
		s.stats.gossipIgnored.Add(1)
		return fmt.Errorf("%w: index of %s already held", ErrGossipIgnored, from)
	}
	ix, err := validateIndex(IndexKey(from), rawIx)
	if err != nil {
		return s.lie(from, "index: "+err.Error())
	}
	if ok && held.ix.LastSeenAt >= ix.LastSeenAt {
		s.stats.gossipIgnored.Add(1)
		return fmt.Errorf("%w: index of %s older than the one held", ErrGossipIgnored, from)
	}
	if _, err := s.heartbeat(ix.LastSeenAt, now); err != nil {
		s.stats.gossipIgnored.Add(1)
		s.stats.refused.Add(1)
		return fmt.Errorf("%w: %s's %v", ErrGossipIgnored, from, err)
	}
	if len(rawCards) > len(ix.Agents) {
		return s.lie(from, fmt.Sprintf("%d cards for an index of %d agents", len(rawCards), len(ix.Agents)))
	}
	// Check every carried card before taking anything: a message with a
	// lie in it is refused whole.
	cards := make([]*agentcard.Card, len(ix.Agents))
	for i, v := range rawCards {
		ie := ix.Agents[i]
		if s.holds(from, ie) {
			continue
		}
		c, err := openCard(from, ie.ID, v)
		if err == nil && c.Revision != ie.Revision {
			err = fmt.Errorf("card %s is at revision %d, its index lists %d", c.Address(), c.Revision, ie.Revision)
		}
		if err != nil {
			return s.lie(from, "card: "+err.Error())
		}
		cards[i] = &c
	}
	taken, err := s.takeIndex(from, ix, sum)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGossipIgnored, err)
	}
	if taken.LastSeenAt != ix.LastSeenAt {
		// A newer index of from was taken meanwhile (two messages
		// checked at once): this one must not undo it.
		s.stats.gossipIgnored.Add(1)
		return fmt.Errorf("%w: index of %s older than the one held", ErrGossipIgnored, from)
	}
	s.stats.gossipTaken.Add(1)
	s.gossip.hold(from, data)
	s.retain(from, ix)
	missing := false
	for i, ie := range ix.Agents {
		var e *cardEntry
		if c := cards[i]; c != nil {
			if e, err = s.takeCard(*c); err != nil {
				continue
			}
		} else {
			s.cache.mu.Lock()
			e = s.cache.cards[ie.ID+"@"+from.String()]
			s.cache.mu.Unlock()
			if e == nil || e.card.Revision != ie.Revision {
				missing = true
				continue
			}
		}
		s.vouch(e, ix)
		if _, ok := s.deliver(e); ok {
			s.stats.gossipCards.Add(1)
		}
	}
	if missing {
		s.fetchLater(from)
	}
	return nil
}

// lie counts and reports a roster message from a peer that lied, and
// returns its error.
func (s *Service) lie(from peer.ID, reason string) error {
	s.stats.gossipRefused.Add(1)
	err := &GossipError{Peer: from, Reason: reason}
	s.log.Debugw("roster message refused", "peer", from, "err", err)
	if s.cfg.events != nil {
		s.cfg.events(SecurityEvent{Code: err.Code(), Peer: from, Detail: "roster message: " + reason})
	}
	return err
}

// retainer is the part of a [Sink] that drops the cards of agents their
// host no longer lists (*agentcard.Registry has it).
type retainer interface {
	RetainPeer(p peer.ID, keep []string) []string
}

// retain drops host's cached cards that ix, host's signed index just
// taken, no longer lists, and the sink's too when it can: an agent its
// host removed leaves every registry with the host's next roster message,
// not one TTL after its last heartbeat.
func (s *Service) retain(host peer.ID, ix Index) {
	keep := make([]string, 0, len(ix.Agents))
	for _, ie := range ix.Agents {
		keep = append(keep, ie.ID)
	}
	s.cache.mu.Lock()
	for _, addr := range slices.Clone(s.cache.byHost[host.String()]) {
		if _, ok := ix.Entry(s.cache.cards[addr].card.ID); !ok {
			s.cache.dropCard(addr)
		}
	}
	s.cache.mu.Unlock()
	if r, ok := s.sink.(retainer); ok {
		if gone := r.RetainPeer(host, keep); len(gone) > 0 {
			s.log.Debugw("agents removed by their host", "peer", host, "agents", gone)
			if s.cfg.withdrawn != nil {
				s.cfg.withdrawn(host, gone)
			}
		}
	}
}

// fetchLater queues host, whose roster message listed cards it did not
// carry, for the fetch loop.
func (s *Service) fetchLater(host peer.ID) {
	s.gossip.mu.Lock()
	if len(s.gossip.pending) < maxFetchQueue {
		s.gossip.pending[host] = true
	}
	s.gossip.mu.Unlock()
	select {
	case s.gossip.wake <- struct{}{}:
	default:
	}
}

// fetchLoop reads the cards that roster messages listed without carrying
// them, at most [parallelism] hosts at once, until the service closes.
//
// It also sends this node's latest roster message when publishGossip held
// one back (past the rate, or while no peer was on the topic), checking
// once per refill.
func (s *Service) fetchLoop() {
	t := time.NewTicker(s.gossipRefill())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			if s.cfg.gossipPeers != nil && s.cfg.gossipPeers() == 0 {
				continue // still no one to send it to: it stays due
			}
			if s.gossipDue.Swap(false) {
				if own := s.own.Load(); own != nil && own.gossip != nil {
					s.publishGossip(s.ctx, own.gossip)
				}
			}
			continue
		case <-s.gossip.wake:
		}
		s.gossip.mu.Lock()
		hosts := make([]peer.ID, 0, len(s.gossip.pending))
		for p := range s.gossip.pending {
			hosts = append(hosts, p)
		}
		clear(s.gossip.pending)
		s.gossip.mu.Unlock()
		forEach(len(hosts), parallelism, func(i int) {
			p := hosts[i]
			s.cache.mu.Lock()
			ie, ok := s.cache.indexes[p]
			s.cache.mu.Unlock()
			if !ok {
				return
			}
			for _, a := range ie.ix.Agents {
				e, err := s.listed(s.ctx, s.dht, p, ie.ix, a, false)
				if err != nil {
					s.log.Debugw("listed card unreadable", "agent", a.ID, "peer", p, "err", err)
					continue
				}
				s.deliver(e)
			}
		})
	}
}

// gossipRefill is how often an author's roster messages are taken past
// the burst: [gossipRefill], or a quarter of the republish interval when
// shorter.
func (s *Service) gossipRefill() time.Duration { return min(gossipRefill, s.cfg.republish/4) }

// publishGossip sends msg, this node's roster message, on the roster
// topic; a failure is logged, the DHT records stand in for it. It keeps
// within the rate receivers take ([gossipBurst] less one, then one per
// 1.25 refills, a margin for the network's jitter): past it the message
// is not sent now, and the fetch loop sends this node's latest message
// once the rate allows, so a burst of card changes ends with its last
// state taken everywhere rather than ignored.
func (s *Service) publishGossip(ctx context.Context, msg []byte) {
	if s.cfg.gossip == nil {
		return
	}
	reach := -1
	if s.cfg.gossipPeers != nil {
		reach = s.cfg.gossipPeers()
	}
	if reach == 0 {
		// Nobody is on the topic yet: GossipSub would hand the message to
		// no one, and sending it would spend a share of the rate that
		// receivers allow this node for nothing, so that the message
		// which does reach them would wait for the rate to refill. The
		// fetch loop sends the latest once someone is on the topic, if
		// a roster pass or a publish has not by then.
		s.gossipReach.Store(0)
		s.gossipDue.Store(true)
		s.stats.gossipHeld.Add(1)
		return
	}
	if !s.pace.allowBurst(s.self, s.cfg.now(), paceBurst, s.gossipRefill()*5/4, 0) {
		s.gossipDue.Store(true)
		return
	}
	if err := s.cfg.gossip(ctx, msg); err != nil {
		s.log.Debugw("roster gossip not sent", "err", err)
		return
	}
	s.gossipReach.Store(int64(reach))
	if own := s.own.Load(); own != nil && sameBytes(own.gossip, msg) {
		s.gossipDue.Store(false) // the latest went out: nothing is left to send
	}
	s.stats.gossipSent.Add(1)
}

// sameBytes reports whether a and b are the same slice (the same first
// byte and length), not merely equal: the roster message sealed last is
// told from an older one by identity, without comparing up to
// [MaxGossipSize] bytes.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// minGossipPeers is how many peers of the roster topic a roster message
// must go out to for this node to count it as having reached the swarm
// (see [WithGossipPeers]): more than one, so that one peer whose mesh
// has not formed yet does not stop it.
const minGossipPeers = 3

// gossipReached reports whether this node's latest roster message went
// out to at least [minGossipPeers] peers of the roster topic; false when
// their number is not known.
func (s *Service) gossipReached() bool {
	return s.gossipReach.Load() >= minGossipPeers
}

// RosterProtocol is the stream protocol on which a node hands a member
// that has just joined the roster messages it holds, so that the newcomer
// lists every agent at once instead of waiting for each member's next
// heartbeat or reading each from the DHT. The request is empty (the asker
// closes its side); the answer is a uvarint count of messages, at most
// [maxMembers], then each as a uvarint length and its bytes: a roster
// message ([MaxGossipSize] at most) exactly as its author published it.
// The asker checks each as [Service.TakeGossip] checks one from the topic,
// its author being the signer of its index: the node that serves them
// vouches for nothing.
const RosterProtocol = "/nova/roster/1.0.0"

// Roster snapshot bounds that are not options.
const (
	// maxHeldGossip bounds the bytes of roster messages this node keeps to
	// serve on RosterProtocol (one per author, the latest taken).
	maxHeldGossip = 16 << 20
	// rosterServeGap is how often one peer is served a snapshot at most.
	rosterServeGap = 10 * time.Second
	// rosterAskTimeout bounds one snapshot request.
	rosterAskTimeout = 30 * time.Second
)

// hold keeps msg, from's roster message just taken, to serve on
// [RosterProtocol], in place of from's previous one, within
// [maxHeldGossip] bytes in all.
func (g *gossip) hold(from peer.ID, msg []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.held[from]
	if g.heldBytes-len(old)+len(msg) > maxHeldGossip {
		return
	}
	g.held[from] = bytes.Clone(msg)
	g.heldBytes += len(msg) - len(old)
}

// serveRoster answers one request on [RosterProtocol]: this node's own
// roster message and those of others it holds whose heartbeat is fresh;
// each peer at most once per [rosterServeGap].
func (s *Service) serveRoster(st network.Stream) {
	from := st.Conn().RemotePeer()
	mem, err := attachRecords(st)
	if err != nil {
		_ = st.Reset()
		return
	}
	defer mem.Release()
	now := s.cfg.now()
	var msgs [][]byte
	s.gossip.mu.Lock()
	last, ok := s.gossip.served[from]
	if !ok || now.Sub(last) >= rosterServeGap {
		if len(s.gossip.served) >= maxGossipAuthors {
			clear(s.gossip.served)
		}
		s.gossip.served[from] = now
		msgs = make([][]byte, 0, len(s.gossip.held)+1)
		for p, m := range s.gossip.held {
			if p != from {
				msgs = append(msgs, m)
			}
		}
	}
	s.gossip.mu.Unlock()
	if !ok || now.Sub(last) >= rosterServeGap {
		if own := s.own.Load(); own != nil && own.gossip != nil {
			msgs = append(msgs, own.gossip)
		}
	} else {
		_ = st.Reset()
		return
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(rosterAskTimeout))
	w := bufio.NewWriter(st)
	_, _ = w.Write(binary.AppendUvarint(nil, uint64(len(msgs))))
	for _, m := range msgs {
		if writeFrame(w, m) != nil {
			_ = st.Reset()
			return
		}
	}
	if w.Flush() != nil {
		_ = st.Reset()
		return
	}
	s.stats.rosterServed.Add(1)
}

// askRoster asks p for the roster messages it holds on [RosterProtocol]
// and takes each as [Service.TakeGossip] takes one from the topic. It
// returns how many it took and how many p served.
func (s *Service) askRoster(ctx context.Context, p peer.ID) (took, served int, err error) {
	ctx, cancel := context.WithTimeout(ctx, rosterAskTimeout)
	defer cancel()
	st, err := s.h.NewStream(ctx, p, RosterProtocol)
	if err != nil {
		return 0, 0, err
	}
	mem, err := attachRecords(st)
	if err != nil {
		_ = st.Reset()
		return 0, 0, err
	}
	defer mem.Release()
	defer st.Close()
	if err := mem.Grow(MaxGossipSize); err != nil {
		_ = st.Reset()
		return 0, 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	_ = st.CloseWrite()
	r := bufio.NewReaderSize(st, 4<<10)
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, 0, err
	}
	if n > maxMembers+1 {
		_ = st.Reset()
		return 0, 0, fmt.Errorf("%d roster messages served, more than %d", n, maxMembers+1)
	}
	buf := make([]byte, 0, 4<<10)
	served = int(n)
	for range n {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return took, served, err
		}
		if size > MaxGossipSize {
			_ = st.Reset()
			return took, served, fmt.Errorf("roster message of %d bytes, more than %d", size, MaxGossipSize)
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return took, served, err
		}
		author, err := gossipAuthor(buf)
		if err != nil {
			s.log.Debugw("served roster message unreadable", "peer", p, "err", err)
			continue
		}
		if err := s.TakeGossip(author, buf); err == nil {
			took++
			s.stats.rosterAsked.Add(1)
		}
	}
	return took, served, nil
}

// gossipAuthor returns the signer of a roster message's index, unverified:
// [Service.TakeGossip] verifies the index against it.
func gossipAuthor(msg []byte) (peer.ID, error) {
	r := bufio.NewReader(bytes.NewReader(msg))
	if _, err := binary.ReadUvarint(r); err != nil {
		return "", err
	}
	ix, err := readFrame(r, MaxIndexSize, nil)
	if err != nil {
		return "", err
	}
	env, err := record.UnmarshalEnvelope(ix)
	if err != nil {
		return "", err
	}
	return peer.IDFromPublicKey(env.PublicKey)
}
