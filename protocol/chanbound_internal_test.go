package protocol

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
)

// floodRound has mallory open n fresh channels to a0 on a new stream, send
// one envelope on each, wait until the target handled and persisted all
// of them, and end the stream, so that every channel is idle.
func floodRound(t *testing.T, tg *rvTarget, m *rvMallory, round, n int) {
	t.Helper()
	s := m.stream(tg, "m")
	s.drain()
	f := envelope.NewFactory()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("r%d-c%05d", round, i)
		s.write(&wireMsg{Kind: kindOpen, Ch: ids[i], From: m.addr("m"), To: "a0"})
		env, _ := f.New(m.addr("m"), "a0", envelope.TypeNotification, nil)
		s.write(&wireMsg{Kind: kindEnvelope, Ch: ids[i], Seq: 1, Env: env})
	}
	s.flush()
	prefix := m.h.ID().String() + "/"
	settled := func() bool {
		tg.r.mu.Lock()
		defer tg.r.mu.Unlock()
		for _, id := range ids {
			ic := tg.r.inChans[prefix+id]
			if ic == nil {
				return false
			}
			ic.mu.Lock()
			done := ic.watermark == 1 && !ic.dirty
			ic.mu.Unlock()
			if !done {
				return false
			}
		}
		return true
	}
	if !rvWait(t, 20*time.Second, settled) {
		t.Fatalf("round %d: the target did not take, handle and persist all %d channels", round, n)
	}
	_ = s.st.Reset()
	if !rvWait(t, 5*time.Second, func() bool {
		tg.r.mu.Lock()
		defer tg.r.mu.Unlock()
		for _, id := range ids {
			if ic := tg.r.inChans[prefix+id]; ic != nil && (ic.out == nil || !ic.out.ended.Load()) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("round %d: the target did not see the stream end", round)
	}
}

// A peer that opens fresh channels without end, each with an envelope so
// that it has a watermark, leaves at most maxInChannelsPerPeer channels and
// maxMarksPerPeer remembered watermarks on the target, in memory and in
// its store: the least recently used are forgotten and deleted. A channel
// evicted recently still reopens at its watermark (its duplicates are
// recognised); honest traffic from another peer is delivered exactly once
// throughout.
func TestChannelWatermarksBounded(t *testing.T) {
	store := NewMemStore()
	tg := rvNewTarget(t, WithStore(store))
	var delivered atomic.Int64
	var honest atomic.Int64
	tg.r.Handle("a0", func(_ context.Context, env *envelope.Envelope) (any, error) {
		if strings.HasPrefix(env.Sender, "b0@") {
			honest.Add(1)
		} else {
			delivered.Add(1)
		}
		return nil, nil
	})
	m := rvNewMallory(t, tg)

	// An honest peer, b0, holds a channel to a0 throughout.
	f := envelope.NewFactory()
	hb := loopbackHost(t)
	rb, regB := startRouter(t, hb, []string{"b0"}, WithFactory(f))
	connectHosts(t, hb, tg.h)
	to := "a0@" + tg.h.ID().String()
	if !rvWait(t, 10*time.Second, func() bool { _, ok := regB.Get(to); return ok }) {
		t.Fatal("the honest peer never learned a0's card")
	}
	post := func(payload string) {
		t.Helper()
		env, _ := f.New("b0", to, envelope.TypeNotification, []byte(payload))
		if _, err := rb.Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
	post(`"before"`)

	const rounds = 3
	for round := range rounds {
		if round > 0 {
			// The scan that evicts idle channels runs at most once a
			// second per peer: wait for the next one to be allowed.
			tg.r.mu.Lock()
			last := tg.r.inByPeer[m.h.ID()].scanned
			tg.r.mu.Unlock()
			rvWait(t, 2*time.Second, func() bool { return time.Since(last) > time.Second })
		}
		floodRound(t, tg, m, round, maxInChannelsPerPeer)
		post(fmt.Sprintf(`"during %d"`, round))
	}

	prefix := m.h.ID().String() + "/"
	count := func(keys map[string]uint64) (n int) {
		for k := range keys {
			if strings.HasPrefix(k, prefix) {
				n++
			}
		}
		return n
	}
	tg.r.mu.Lock()
	live, marks := len(tg.r.inByPeer[m.h.ID()].chans), count(tg.r.watermarks)
	tg.r.mu.Unlock()
	stored, _ := store.LoadWatermarks()
	t.Logf("after %d channels: %d live, %d watermarks remembered, %d stored", rounds*maxInChannelsPerPeer, live, marks, count(stored))
	if live > maxInChannelsPerPeer || marks > maxMarksPerPeer {
		t.Errorf("the peer holds %d channels and %d remembered watermarks; bounds %d and %d", live, marks, maxInChannelsPerPeer, maxMarksPerPeer)
	}
	if n := count(stored); n > maxInChannelsPerPeer+maxMarksPerPeer {
		t.Errorf("the store holds %d of the peer's watermarks; at most %d expected", n, maxInChannelsPerPeer+maxMarksPerPeer)
	}
	if marks == 0 {
		t.Error("no watermark remembered: the test did not evict")
	}
	if got := delivered.Load(); got != rounds*maxInChannelsPerPeer {
		t.Errorf("mallory's envelopes delivered %d times, want %d", got, rounds*maxInChannelsPerPeer)
	}

	// The peer is at its bound with round 2's idle channels: an open
	// evicts them once the once-a-second scan is allowed again, and the
	// watermarks remembered are then those evicted last, round 2's.
	s := m.stream(tg, "m")
	replies := s.replies()
	var got *inMsg
	rvWait(t, 5*time.Second, func() bool {
		s.write(&wireMsg{Kind: kindOpen, Ch: "trigger", From: m.addr("m"), To: "a0"})
		s.flush()
		got = openedOn(t, replies, "trigger")
		return got.Kind == kindOpened
	})
	if got.Kind != kindOpened {
		t.Fatalf("open after the peer's channels went idle: kind %d (%s)", got.Kind, got.Msg)
	}
	remembered := ""
	tg.r.mu.Lock()
	for k := range tg.r.watermarks {
		if id, ok := strings.CutPrefix(k, prefix); ok {
			if !strings.HasPrefix(id, "r2-") {
				t.Errorf("remembered %s, not among the channels evicted last", id)
			}
			remembered = id
		}
	}
	tg.r.mu.Unlock()
	// A remembered channel reopens at its watermark (its duplicates are
	// recognised); a forgotten one at 0.
	s.write(&wireMsg{Kind: kindOpen, Ch: remembered, From: m.addr("m"), To: "a0"})
	s.write(&wireMsg{Kind: kindOpen, Ch: "r0-c00000", From: m.addr("m"), To: "a0"})
	s.flush()
	if got := openedOn(t, replies, remembered); got.Kind != kindOpened || got.W != 1 {
		t.Errorf("reopening a remembered channel: kind %d (%s), watermark %d; want opened at 1", got.Kind, got.Msg, got.W)
	}
	if got := openedOn(t, replies, "r0-c00000"); got.Kind != kindOpened || got.W != 0 {
		t.Errorf("reopening a forgotten channel: kind %d, watermark %d; want opened at 0", got.Kind, got.W)
	}

	post(`"after"`)
	if !rvWait(t, 10*time.Second, func() bool { return honest.Load() == rounds+2 }) {
		t.Fatalf("the honest peer's envelopes were delivered %d times, want %d", honest.Load(), rounds+2)
	}
}

// Watermarks loaded at Start from a store that holds more than the bounds
// (a store written without them, or junk) are trimmed to the bounds, in
// memory and in the store, at the first open.
func TestLoadedWatermarksTrimmed(t *testing.T) {
	store := NewMemStore()
	other := loopbackHost(t).ID().String() // a peer that never comes back
	marks := map[string]uint64{"junk": 3, other + "/zero": 0}
	for i := range maxMarksPerPeer + 500 {
		marks[fmt.Sprintf("%s/c%05d", other, i)] = 1
	}
	if err := store.SaveWatermarks(marks); err != nil {
		t.Fatal(err)
	}
	tg := rvNewTarget(t, WithStore(store))
	m := rvNewMallory(t, tg)
	s := m.stream(tg, "m")
	replies := s.replies()
	s.write(&wireMsg{Kind: kindOpen, Ch: "c1", From: m.addr("m"), To: "a0"})
	s.flush()
	if got := openedOn(t, replies, "c1"); got.Kind != kindOpened {
		t.Fatalf("open: kind %d (%s)", got.Kind, got.Msg)
	}
	stored, _ := store.LoadWatermarks()
	tg.r.mu.Lock()
	held := len(tg.r.watermarks)
	tg.r.mu.Unlock()
	if held > maxMarksPerPeer || len(stored) > maxMarksPerPeer {
		t.Errorf("%d watermarks held, %d stored; bound %d", held, len(stored), maxMarksPerPeer)
	}
	if _, ok := stored["junk"]; ok {
		t.Error("an unreadable key stayed in the store")
	}
}
