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
		if from == self || len(pm.Data) > 1<<20 {
			continue
		}
		var dg digest
		if decMode.Unmarshal(pm.Data, &dg) != nil || len(dg.Clock) == 0 {
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
		d.ahead = dg.Clock.Merge(d.ahead)
		d.mu.Unlock()
		target := from
		if d.m.h.Network().Connectedness(from) != network.Connected {
			target = pm.ReceivedFrom
		}
		if target == "" || target == self {
			continue
		}
		p := peer.ID(target)
		d.m.spawn(func() { _ = d.catchUp(d.m.ctx, p) })
	}
}
