package crdt

import (
	"context"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
)

// The digest: every digestEvery, a node publishes its clock of each open
// document on the companion topic <doc topic>/clock (when it changed, and
// every digestForce regardless). A node that sees a clock with updates it
// lacks asks that peer (or the neighbour that forwarded the digest) for a
// catch-up, so an update whose broadcast was lost is repaired within
// seconds, without waiting for a later update to reveal the gap.
const (
	digestEvery = 2 * time.Second
	digestForce = 10 * time.Second
)

// DigestTopic is the companion topic of a document's clock digests.
func DigestTopic(swarm, doc string) string { return Topic(swarm, doc) + "/clock" }

type digest struct {
	Clock delta.VersionVector `cbor:"c"`
}

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
	d.m.wg.Go(d.digestLoop)
	d.m.wg.Go(d.digestReader)
	return nil
}

func (d *Doc) digestLoop() {
	t := time.NewTicker(digestEvery)
	defer t.Stop()
	var last delta.VersionVector
	lastSent := time.Time{}
	for {
		select {
		case <-d.m.ctx.Done():
			return
		case <-t.C:
		}
		clock := d.Clock()
		if len(clock) == 0 || (clock.Compare(last) == delta.Equal && time.Since(lastSent) < digestForce) {
			continue
		}
		b, err := encMode.Marshal(digest{Clock: clock})
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(d.m.ctx, 5*time.Second)
		if d.dtopic.Publish(ctx, b) == nil {
			last, lastSent = clock, time.Now()
		}
		cancel()
	}
}

func (d *Doc) digestReader() {
	self := d.m.h.ID()
	for {
		pm, err := d.dsub.Next(d.m.ctx)
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
		ahead := false
		for r, n := range dg.Clock {
			if n > mine[r] {
				ahead = true
				break
			}
		}
		if !ahead {
			continue
		}
		d.mu.Lock()
		if _, known := d.aheadBy[from]; known || len(d.aheadBy) < maxClaims {
			if d.aheadBy == nil {
				d.aheadBy = make(map[peer.ID]delta.VersionVector)
			}
			d.aheadBy[from] = dg.Clock
		}
		d.mu.Unlock()
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
	if decMode.Unmarshal(data, &dg) != nil || len(dg.Clock) == 0 {
		return digest{}, false
	}
	return dg, true
}

// maxClaims bounds the digests a document keeps for Info's PeersAhead: one
// per peer, and no more peers than this.
const maxClaims = 256

// maxCatchUps is how many catch-ups a document runs at once, each from a
// different peer.
const maxCatchUps = 4

// catchUpFrom asks p for what the document lacks, in the background, unless
// a catch-up from p is already under way or maxCatchUps are: what asked for
// this one then is covered by the one under way, by the next digest (every
// 2 s) or by anti-entropy's rounds while updates are held. Every trigger
// that a peer's message can pull (a digest, an update with a gap) goes
// through here: a peer publishing digests or updates as fast as GossipSub
// lets it would otherwise start a goroutine and a stream for each. A
// catch-up that p answers withdraws p's own digest claim from PeersAhead:
// what p claimed and did not send, it does not have.
func (d *Doc) catchUpFrom(p peer.ID) {
	d.mu.Lock()
	if _, busy := d.catching[p]; busy || len(d.catching) >= maxCatchUps || d.stopped {
		d.mu.Unlock()
		return
	}
	if d.catching == nil {
		d.catching = make(map[peer.ID]struct{})
	}
	d.catching[p] = struct{}{}
	d.mu.Unlock()
	started := d.m.spawn(func() {
		err := d.catchUp(d.m.ctx, p)
		d.mu.Lock()
		delete(d.catching, p)
		if err == nil {
			delete(d.aheadBy, p)
		}
		d.mu.Unlock()
	})
	if !started {
		d.mu.Lock()
		delete(d.catching, p)
		d.mu.Unlock()
	}
}
