package crdt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// A peer that floods a document's digest topic with clocks it cannot back
// (updates of a replica nobody has) gets one catch-up at a time from this
// node, not a goroutine and a stream per digest; and once it has answered
// one, its claim no longer shows the document as behind.
func TestDigestFloodStartsOneCatchUpAtATime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hA, psA := pubsubHost(t, ctx)
	hB, psB := pubsubHost(t, ctx)

	m, err := New(hA, psA, "test", nopStore{}, WithCatchupInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := m.Open(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}

	// The flooder answers each catch-up after 200 ms, with nothing.
	var streams, inFlight, maxInFlight atomic.Int64
	hB.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Close()
		streams.Add(1)
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		if _, err := frame.NewReader(bufio.NewReader(s), 1<<20).Next(); err != nil {
			inFlight.Add(-1)
			s.Reset()
			return
		}
		time.Sleep(200 * time.Millisecond) // the flooder's slow answer: part of the scenario
		out, _ := encMode.Marshal(catchupFrame{End: true})
		// The catch-up ends with this answer: the manager may start the
		// next one as soon as it reads it, before this handler returns.
		inFlight.Add(-1)
		_ = frame.Write(s, out)
	})
	if err := hB.Connect(ctx, peer.AddrInfo{ID: hA.ID(), Addrs: hA.Addrs()}); err != nil {
		t.Fatal(err)
	}
	topic, err := psB.Join(DigestTopic("test", "doc"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	waitfor.Eventually(t, 10*time.Second, func() error {
		if len(topic.ListPeers()) == 0 {
			return errors.New("the flooder has not joined the document's digest mesh")
		}
		return nil
	})

	const digests = 200
	floodStart := time.Now()
	for i := range digests {
		b, _ := encMode.Marshal(digest{Clock: delta.VersionVector{"ghost": uint64(1000 + i)}})
		if err := topic.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the flood's pace: part of the scenario
	}
	flood := time.Since(floodStart)
	// The flood lasts about 0.5 s; each catch-up 0.2 s. Wait until none
	// has started or run for half a second: the end of the catch-ups is
	// an absence, so it is a quiet spell.
	last, quietSince := streams.Load(), time.Now()
	waitfor.Eventually(t, 10*time.Second, func() error {
		if n := streams.Load(); n != last || inFlight.Load() > 0 {
			last, quietSince = n, time.Now()
		}
		if quiet := time.Since(quietSince); quiet < 500*time.Millisecond {
			return fmt.Errorf("catch-ups still under way (%d streams, %d in flight, quiet for %s)", streams.Load(), inFlight.Load(), quiet)
		}
		return nil
	})
	t.Logf("%d digests: %d catch-up streams, at most %d at once", digests, streams.Load(), maxInFlight.Load())
	if got := maxInFlight.Load(); got != 1 {
		t.Errorf("%d catch-ups from the flooder at once, want 1", got)
	}
	// One catch-up at a time, 0.2 s each: a few for a 0.5 s flood (a
	// loaded machine stretches the flood, and the bound with it).
	if got, most := streams.Load(), int64(flood/(200*time.Millisecond))+8; got > most {
		t.Errorf("%d catch-up streams for %d digests over %s, want at most %d (one at a time, 0.2 s each)", got, digests, flood.Round(time.Millisecond), most)
	}
	if d.Info().PeersAhead {
		t.Error("the document still shows peers ahead after the flooder answered with nothing")
	}
}

// Digest claims are bounded: at most maxClaims peers, each with at most
// maxClaimEntries replicas; a claim older than claimTTL no longer counts
// and makes room for a new one.
func TestDigestClaimsBounded(t *testing.T) {
	d := &Doc{}
	now := time.Now()
	big := make([]replicaCount, maxClaimEntries)
	for i := range big {
		big[i] = replicaCount{fmt.Sprintf("r%d", i), 5}
	}
	for i := range maxClaims + 50 {
		d.claimLocked(peer.ID(fmt.Sprint("p", i)), claim{at: now, ahead: big})
	}
	if len(d.aheadBy) != maxClaims {
		t.Fatalf("%d claims held, want %d", len(d.aheadBy), maxClaims)
	}
	if !d.peersAheadLocked(delta.VersionVector{}, now) {
		t.Fatal("live claims of updates this node lacks: not ahead")
	}
	if d.peersAheadLocked(delta.VersionVector{"r0": 5, "r1": 5, "r2": 5, "r3": 5, "r4": 5, "r5": 5, "r6": 5, "r7": 5}, now) {
		t.Fatal("claims this node's clock covers: ahead")
	}
	later := now.Add(claimTTL + time.Second)
	if d.peersAheadLocked(delta.VersionVector{}, later) {
		t.Fatal("claims older than claimTTL still count")
	}
	d.claimLocked("newcomer", claim{at: later, ahead: big[:1]})
	if _, ok := d.aheadBy["newcomer"]; !ok || len(d.aheadBy) != 1 {
		t.Fatalf("a new claim did not replace the expired ones: %d held", len(d.aheadBy))
	}
}
