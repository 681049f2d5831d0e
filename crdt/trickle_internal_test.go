package crdt

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// digestSwarm runs digestLoop for n documents on simulated time, joined by
// a bus that delivers every published digest to every other document at
// once: a digest equal to the receiver's state counts as heard, a
// different one resets the receiver's schedule, as digestReader does.
type digestSwarm struct {
	docs   []*Doc
	mu     sync.Mutex
	state  []int        // each document's state; equal numbers agree
	deaf   map[int]bool // documents that receive nothing
	sent   []time.Time  // when each digest went out
	sentBy []int
}

func newDigestSwarm(ctx context.Context, n int) *digestSwarm {
	s := &digestSwarm{state: make([]int, n), deaf: map[int]bool{}}
	for range n {
		s.docs = append(s.docs, &Doc{ctx: ctx, digestNow: make(chan struct{}, 1), digestReset: make(chan struct{}, 1)})
	}
	return s
}

func (s *digestSwarm) run(wg *sync.WaitGroup) {
	for i, d := range s.docs {
		wg.Go(func() { d.digestLoop(func() { s.publish(i) }) })
	}
}

func (s *digestSwarm) publish(from int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, time.Now())
	s.sentBy = append(s.sentBy, from)
	for i, d := range s.docs {
		if i == from || s.deaf[i] {
			continue
		}
		if s.state[i] == s.state[from] {
			d.heard.Add(1)
		} else {
			d.resetDigest()
		}
	}
}

// since counts the digests sent from t on, by anyone but skip.
func (s *digestSwarm) since(t time.Time, skip int) (n int, maxGap time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := t
	for i, at := range s.sent {
		if at.Before(t) || s.sentBy[i] == skip {
			continue
		}
		n++
		maxGap = max(maxGap, at.Sub(last))
		last = at
	}
	return n, max(maxGap, time.Since(last))
}

// TestDigestsOfAnAgreeingSwarmDoNotGrowWithIt: once every node holds the
// same document, the digests sent in all per interval stay a handful,
// whether 10 or 200 nodes hold it (each publishing every digestForce on its
// own would be 10 or 200 per interval), and some digest still goes out at
// least every two digestForce: every node starts an interval within
// digestForce of the last digest, having heard nothing in it, and publishes
// before that interval ends.
func TestDigestsOfAnAgreeingSwarmDoNotGrowWithIt(t *testing.T) {
	for _, n := range []int{10, 200} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			s := newDigestSwarm(ctx, n)
			s.run(&wg)
			time.Sleep(time.Minute) // intervals grow to digestForce
			from := time.Now()
			const window = 100 * time.Second
			time.Sleep(window)
			sent, gap := s.since(from, -1)
			cancel()
			wg.Wait()
			perInterval := float64(sent) / float64(window/digestForce)
			t.Logf("%d nodes: %d digests in %v (%.1f per %v), longest gap %v", n, sent, window, perInterval, digestForce, gap)
			if perInterval > 3*digestRedundancy {
				t.Errorf("%d nodes sent %.1f digests per %v, want at most %d", n, perInterval, digestForce, 3*digestRedundancy)
			}
			if gap > 2*digestForce {
				t.Errorf("%d nodes: no digest for %v, want one at least every %v", n, gap, 2*digestForce)
			}
		})
	}
}

// TestDigestSoonAfterAChange: a node whose document changed sends its
// digest within digestEvery, however long the swarm had agreed.
func TestDigestSoonAfterAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		s := newDigestSwarm(ctx, 50)
		s.run(&wg)
		time.Sleep(time.Minute)
		s.mu.Lock()
		s.state[7] = 1
		s.mu.Unlock()
		changed := time.Now()
		s.docs[7].resetDigest() // what notifyLocked does
		time.Sleep(digestEvery)
		s.mu.Lock()
		var at time.Time
		for i, by := range s.sentBy {
			if by == 7 && !s.sent[i].Before(changed) {
				at = s.sent[i]
				break
			}
		}
		s.mu.Unlock()
		cancel()
		wg.Wait()
		if at.IsZero() {
			t.Fatalf("no digest from the changed node within %v", digestEvery)
		}
	})
}

// TestDigestsReachANodeThatLacksAnUpdate: a node that missed an update
// (and every digest after it) keeps sending its own, which disagrees, and
// the others answer it within digestEvery or so each time: it hears a
// digest showing what it lacks at least every digestForce.
func TestDigestsReachANodeThatLacksAnUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		s := newDigestSwarm(ctx, 50)
		s.mu.Lock()
		for i := range s.state {
			s.state[i] = 1
		}
		s.state[3] = 0
		s.deaf[3] = true
		s.mu.Unlock()
		s.run(&wg)
		time.Sleep(time.Minute)
		from := time.Now()
		const window = 100 * time.Second
		time.Sleep(window)
		sent, gap := s.since(from, 3)
		cancel()
		wg.Wait()
		t.Logf("%d digests by the others in %v, longest gap %v", sent, window, gap)
		if gap > digestForce {
			t.Errorf("the others sent no digest for %v, want one at least every %v", gap, digestForce)
		}
		if perInterval := float64(sent) / float64(window/digestForce); perInterval > 4*digestRedundancy*float64(digestForce/digestEvery) {
			t.Errorf("%.1f digests per %v", perInterval, digestForce)
		}
	})
}
