package crdt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
)

// The digest: a node publishes its clock of each open document on the
// companion topic <doc topic>/clock. A node that sees a clock with updates
// it lacks asks that peer (or the neighbour that forwarded the digest) for
// a catch-up, so an update whose broadcast was lost is repaired within
// seconds, without waiting for a later update to reveal the gap.
//
// When digests go out follows Trickle (RFC 6206), so that a swarm that
// agrees on a document sends a few digests per interval in all, however
// many nodes hold it: were every node to publish on its own schedule, each
// node would receive and check the digests of all the others, a cost that
// grows with the swarm. A node's interval runs from digestEvery, doubling,
// up to digestForce. In each interval it picks a moment uniformly in the
// interval's second half and publishes its digest then, unless it has
// already heard digestRedundancy digests equal to its own (same clock,
// same log digest) in the interval. Anything that disagrees (its own
// document changed, or a peer's digest differs from its own) sets the
// interval back to digestEvery, so news spreads within a few seconds; a
// node that missed an update hears a digest of the others' at least about
// every digestForce, and its own digest, which differs, sets theirs back.
const (
	digestEvery      = 2 * time.Second
	digestForce      = 10 * time.Second
	digestRedundancy = 2
)

// DigestTopic is the companion topic of a document's clock digests.
func DigestTopic(swarm, doc string) string { return Topic(swarm, doc) + "/clock" }

// A digest is a document's clock and the digest of its whole signed log
// (the hash of its per-replica digests): two nodes with equal clocks
// but different logs (a replica equivocated) see that they differ.
type digest struct {
	Clock delta.VersionVector `cbor:"c"`
	Sum   []byte              `cbor:"s,omitempty"`
}

// logSum returns the digest of the document's signed log.
func (d *Doc) logSum() []byte {
	d.mu.Lock()
	s := d.log.summary()
	d.mu.Unlock()
	h := sha256.New()
	for _, r := range s {
		h.Write([]byte(r.Replica))
		h.Write([]byte{0})
		h.Write(r.Digest[:])
	}
	return h.Sum(nil)
}

// joinDigestGap is the least time between two digests sent because
// peers joined (a peer joining and leaving in a loop makes at most one
// digest per gap).
const joinDigestGap = 100 * time.Millisecond

func (d *Doc) startDigest() error {
	name := DigestTopic(d.m.swarm, d.name)
	t, err := d.m.ps.Join(name)
	if err != nil {
		return err
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(256))
	if err != nil {
		_ = t.Close()
		return err
	}
	d.dtopic, d.dsub = t, sub
	for _, t := range []*pubsub.Topic{d.topic, d.dtopic} {
		h, err := t.EventHandler()
		if err != nil {
			return err // stop cancels what started
		}
		d.joins = append(d.joins, h)
		d.wg.Go(func() { d.followJoins(h) })
	}
	d.wg.Go(func() { d.digestLoop(d.publishDigest) })
	d.wg.Go(d.digestReader)
	return nil
}

// followJoins asks for a digest at once whenever a peer joins one of the
// document's topics (h follows one) and this node wrote the document in
// the last digestForce. An update this node published before it knew that
// the peer follows the document never reached it; the digest shows the
// peer what it lacks, and the peer asks for a catch-up then, not at the
// next periodic digest. A peer's joins of the two topics may come in
// either order, and far apart: a digest goes out on each. (An update
// published before the peer could be sent anything at all, right after
// connecting, is found by the catch-up each side asks of the other then:
// see serve.)
func (d *Doc) followJoins(h *pubsub.TopicEventHandler) {
	for {
		ev, err := h.NextPeerEvent(d.ctx)
		if err != nil {
			return
		}
		if ev.Type != pubsub.PeerJoin {
			continue
		}
		// GossipSub learns a new peer's topics before it can send to the
		// peer (it waits for its own identify of the peer): a digest sent
		// then is lost. Wait until it can, up to joinSendableWait.
		for wait := time.Millisecond; !slices.Contains(d.dtopic.ListPeers(), ev.Peer); wait *= 2 {
			if wait > joinSendableWait {
				break
			}
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case d.digestNow <- struct{}{}:
		default:
		}
	}
}

// joinSendableWait bounds how long followJoins waits for a joining peer
// to become reachable through GossipSub (about 1 s in all, in doubling
// steps from 1 ms).
const joinSendableWait = 512 * time.Millisecond

// wroteSince reports whether this node wrote the document after t.
func (d *Doc) wroteSince(t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastLocal.After(t)
}

// digestLoop calls publish (publishDigest) on the schedule above, and at
// once when followJoins asks (see there).
func (d *Doc) digestLoop(publish func()) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	interval := digestEvery
	for {
		d.heard.Store(0)
		at := interval/2 + rand.N(interval/2)
		timer.Reset(at)
		due, restart := true, false
		for !restart {
			select {
			case <-d.ctx.Done():
				return
			case <-timer.C:
			case <-d.digestReset:
				if interval > digestEvery {
					interval, restart = digestEvery, true
				} else {
					d.heard.Store(0) // what was heard agreed with what this node held before
				}
				continue
			case <-d.digestNow:
				if !d.wroteSince(time.Now().Add(-digestForce)) {
					continue
				}
				publish()
				select {
				case <-d.ctx.Done():
					return
				case <-time.After(joinDigestGap):
				}
				continue
			}
			if !due {
				break // the interval is over
			}
			due = false
			if d.heard.Load() < digestRedundancy {
				publish()
			}
			timer.Reset(interval - at)
		}
		if !restart {
			interval = min(2*interval, digestForce)
		}
	}
}

// publishDigest publishes the document's clock and log digest.
func (d *Doc) publishDigest() {
	clock := d.Clock()
	if len(clock) == 0 {
		return
	}
	b, err := encMode.Marshal(digest{Clock: clock, Sum: d.logSum()})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
	defer cancel()
	_ = d.dtopic.Publish(ctx, b)
}

// resetDigest tells digestLoop that something disagrees with the digest
// it last published: the document changed, or a peer's digest differs.
func (d *Doc) resetDigest() {
	select {
	case d.digestReset <- struct{}{}:
	default:
	}
}

func (d *Doc) digestReader() {
	self := d.m.h.ID()
	for {
		pm, err := d.dsub.Next(d.ctx)
		if err != nil {
			return
		}
		from := pm.GetFrom()
		if from == self {
			continue
		}
		dg, ok := readDigest(pm.Data)
		if !ok {
			continue
		}
		mine := d.Clock()
		var ahead []replicaCount
		for r, n := range dg.Clock {
			if n > mine[r] && len(r) <= maxReplicaLen {
				ahead = append(ahead, replicaCount{r, n})
				if len(ahead) == maxClaimEntries {
					break
				}
			}
		}
		if len(ahead) == 0 {
			same := mine.Compare(dg.Clock) == delta.Equal
			if same && (len(dg.Sum) == 0 || bytes.Equal(dg.Sum, d.logSum())) {
				d.heard.Add(1) // a digest like this node's own: see digestLoop
				continue
			}
			d.resetDigest()
			if !same {
				continue // the peer lacks updates: this node's digest, soon, tells it which
			}
			// Same clock, another log: one of us lacks a history of an
			// equivocating replica.
		} else {
			d.resetDigest()
			d.mu.Lock()
			d.claimLocked(from, claim{at: time.Now(), ahead: ahead})
			d.mu.Unlock()
		}
		target := from
		if d.m.h.Network().Connectedness(from) != network.Connected {
			target = pm.ReceivedFrom
		}
		if target == "" || target == self {
			continue
		}
		d.catchUpFrom(target)
	}
}

// digestMax is the largest digest message read.
const digestMax = 1 << 20

// readDigest decodes a peer's digest message: at most digestMax bytes, the
// CBOR limits, at least one clock entry.
func readDigest(data []byte) (dg digest, ok bool) {
	if len(data) > digestMax {
		return digest{}, false
	}
	if decMode.Unmarshal(data, &dg) != nil || len(dg.Clock) == 0 || (len(dg.Sum) != 0 && len(dg.Sum) != sha256.Size) {
		return digest{}, false
	}
	return dg, true
}

// A claim is what one peer's latest digest showed this node lacking, kept
// for Info's PeersAhead: a few replicas' counts, when it came. Claims are
// bounded in number (maxClaims peers), in size (maxClaimEntries replicas of
// at most maxReplicaLen bytes: a digest may list 65,536) and in age
// (claimTTL: a peer that is ahead says so again at least every digestForce,
// so a claim nobody repeats, say from a publisher this node cannot ask, is
// dropped).
type claim struct {
	at    time.Time
	ahead []replicaCount
}

type replicaCount struct {
	replica string
	n       uint64
}

const (
	maxClaims       = 256
	maxClaimEntries = 8
	maxReplicaLen   = 128 // a replica id is its node's peer ID (52 bytes for Ed25519)
	claimTTL        = 3 * digestForce
)

// claimLocked records c as from's claim, making room among expired claims
// if the table is full (a claim that finds it full of live ones is
// dropped). Caller holds d.mu.
func (d *Doc) claimLocked(from peer.ID, c claim) {
	if d.aheadBy == nil {
		d.aheadBy = make(map[peer.ID]claim)
	}
	if _, known := d.aheadBy[from]; !known && len(d.aheadBy) >= maxClaims {
		for p, old := range d.aheadBy {
			if c.at.Sub(old.at) > claimTTL {
				delete(d.aheadBy, p)
			}
		}
		if len(d.aheadBy) >= maxClaims {
			return
		}
	}
	d.aheadBy[from] = c
}

// peersAheadLocked reports whether a live claim counts updates that clock
// lacks. Caller holds d.mu.
func (d *Doc) peersAheadLocked(clock delta.VersionVector, now time.Time) bool {
	for _, c := range d.aheadBy {
		if now.Sub(c.at) > claimTTL {
			continue
		}
		for _, rc := range c.ahead {
			if rc.n > clock[rc.replica] {
				return true
			}
		}
	}
	return false
}

// maxCatchUps is how many catch-ups a document runs at once, each from a
// different peer: peers that answer slowly can hold at most this many, and
// only one each.
const maxCatchUps = 32

// catchUpFrom asks p for what the document lacks, in the background. Every
// trigger that a peer's message can pull (a digest, an update with a gap)
// goes through here, and a peer publishing digests or updates as fast as
// GossipSub lets it would otherwise start a goroutine and a stream for
// each: so there is at most one catch-up from p at a time (a trigger that
// comes meanwhile asks for one more once it ends, however many came) and
// at most maxCatchUps per document (beyond, a trigger is dropped: the next
// digest, every 2 to 10 s, or anti-entropy's rounds while updates are held
// ask again). A catch-up that p answers withdraws p's digest claim made
// before it was asked: what p claimed and did not send, it does not have.
func (d *Doc) catchUpFrom(p peer.ID) {
	d.mu.Lock()
	if again, busy := d.catching[p]; busy || len(d.catching) >= maxCatchUps || d.stopped {
		if busy && !again {
			d.catching[p] = true
		}
		d.mu.Unlock()
		return
	}
	if d.catching == nil {
		d.catching = make(map[peer.ID]bool)
	}
	d.catching[p] = false
	d.mu.Unlock()
	started := d.spawn(func() {
		for {
			asked := time.Now()
			err := d.catchUp(d.ctx, p)
			d.mu.Lock()
			if c, ok := d.aheadBy[p]; ok && err == nil && c.at.Before(asked) {
				delete(d.aheadBy, p) // a claim that came after the question stands
			}
			if !d.catching[p] || d.stopped || d.ctx.Err() != nil {
				delete(d.catching, p)
				d.mu.Unlock()
				return
			}
			d.catching[p] = false // asked again meanwhile: one more
			d.mu.Unlock()
		}
	})
	if !started {
		d.mu.Lock()
		delete(d.catching, p)
		d.mu.Unlock()
	}
}
