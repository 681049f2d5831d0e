package channel_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/protocol/channel"
)

// machineIn returns a machine driven into state s.
func machineIn(t testing.TB, s channel.State) *channel.Machine {
	m, _ := channel.New(channel.Config{Retries: 3, Base: time.Second})
	step := func(e channel.Event) {
		if _, err := m.Step(e); err != nil {
			t.Fatal(err)
		}
	}
	switch s {
	case channel.Open:
		step(channel.Connected{})
	case channel.Reconnecting:
		step(channel.Connected{})
		step(channel.TransportLost{})
	case channel.Closed:
		step(channel.Close{})
	}
	if m.State() != s {
		t.Fatalf("setup reached %s, want %s", m.State(), s)
	}
	return m
}

// TestTransitionTable checks every (state, event) pair against the lifecycle.
func TestTransitionTable(t *testing.T) {
	events := []channel.Event{channel.Enqueue{}, channel.Connected{}, channel.DialFailed{}, channel.RetryDue{},
		channel.TransportLost{}, channel.Ack{}, channel.Nack{}, channel.Close{}}
	C, O, R, X := channel.Connecting, channel.Open, channel.Reconnecting, channel.Closed
	// want[state][event] = resulting state, or -1 for invalid.
	const bad = channel.State(255)
	want := map[channel.State][]channel.State{
		//     Enqueue Connected DialFailed RetryDue TransportLost Ack Nack Close
		C: {C, O, R, bad, bad, bad, bad, X},
		O: {O, bad, bad, bad, R, O, O, X},
		R: {R, O, R, R, bad, bad, bad, X},
		X: {bad, bad, bad, bad, bad, bad, bad, bad},
	}
	for s, row := range want {
		for i, e := range events {
			t.Run(fmt.Sprintf("%s/%T", s, e), func(t *testing.T) {
				m := machineIn(t, s)
				_, err := m.Step(e)
				if row[i] == bad {
					if !errors.Is(err, channel.ErrInvalidTransition) || m.State() != s {
						t.Fatalf("want invalid transition, got err=%v state=%s", err, m.State())
					}
					return
				}
				if err != nil || m.State() != row[i] {
					t.Fatalf("got err=%v state=%s, want %s", err, m.State(), row[i])
				}
			})
		}
	}
}

// TestProperty10_ChannelStateMachineValidity: any sequence of events moves
// only along the lifecycle's edges; invalid events are rejected and change
// nothing; every StateChanged action matches the move.
func TestProperty10_ChannelStateMachineValidity(t *testing.T) {
	allowed := map[[2]channel.State]bool{
		{channel.Connecting, channel.Open}: true, {channel.Connecting, channel.Reconnecting}: true,
		{channel.Connecting, channel.Closed}: true, {channel.Open, channel.Reconnecting}: true,
		{channel.Open, channel.Closed}: true, {channel.Reconnecting, channel.Open}: true,
		{channel.Reconnecting, channel.Closed}: true,
		// Parked (Config.Park): redials spent with items pending.
		{channel.Connecting, channel.Away}: true, {channel.Reconnecting, channel.Away}: true,
		{channel.Away, channel.Open}: true, {channel.Away, channel.Closed}: true, {channel.Away, channel.Reconnecting}: true,
	}
	rapid.Check(t, func(t *rapid.T) {
		park := rapid.Bool().Draw(t, "park")
		m, _ := channel.New(channel.Config{Retries: rapid.IntRange(0, 4).Draw(t, "retries"), Base: time.Millisecond, Park: park})
		for i := 0; i < 60; i++ {
			e := rapid.SampledFrom([]channel.Event{channel.Enqueue{Data: i}, channel.Connected{}, channel.DialFailed{},
				channel.RetryDue{}, channel.TransportLost{}, channel.Ack{Seq: uint64(i % 3)}, channel.Nack{Seq: 1}, channel.Close{},
				channel.Wake{}, channel.Expire{Seqs: []uint64{uint64(i % 4)}}}).Draw(t, "event")
			before, pendingBefore := m.State(), len(m.Pending())
			acts, err := m.Step(e)
			if err != nil {
				if !errors.Is(err, channel.ErrInvalidTransition) || m.State() != before || len(m.Pending()) != pendingBefore || acts != nil {
					t.Fatalf("rejected %T changed the machine or returned actions", e)
				}
				continue
			}
			after := m.State()
			if after != before && !allowed[[2]channel.State{before, after}] {
				t.Fatalf("%s -> %s on %T is not a lifecycle edge", before, after, e)
			}
			changes := 0
			for _, a := range acts {
				if sc, ok := a.(channel.StateChanged); ok {
					changes++
					if sc.From != before || sc.To != after {
						t.Fatalf("StateChanged %v, machine went %s -> %s", sc, before, after)
					}
				}
			}
			if (after != before) != (changes == 1) {
				t.Fatalf("%d StateChanged actions for %s -> %s", changes, before, after)
			}
			if after == channel.Closed && len(m.Pending()) != 0 {
				t.Fatal("closed channel keeps pending items")
			}
			if after == channel.Away && (!park || len(m.Pending()) == 0) {
				t.Fatalf("away with park=%v and %d items pending", park, len(m.Pending()))
			}
		}
	})
}

// receiver models the remote side: it takes frames in order, ignores
// duplicates (seq <= watermark) and records what its handler saw.
type receiver struct {
	watermark uint64
	seen      []int
}

func (r *receiver) take(it channel.Item) {
	if it.Seq <= r.watermark {
		return
	}
	if it.Seq != r.watermark+1 {
		panic(fmt.Sprintf("gap: got %d after %d", it.Seq, r.watermark))
	}
	r.watermark = it.Seq
	r.seen = append(r.seen, it.Data.(int))
}

// TestProperty11_ChannelMessageOrdering: N messages sent on a channel whose
// transport fails at random times (dropping what is in flight) reach the
// receiver exactly once each, in the order sent, and each is settled once.
func TestProperty11_ChannelMessageOrdering(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 200).Draw(t, "n")
		m, _ := channel.New(channel.Config{Retries: 3, Base: time.Millisecond})
		rx := &receiver{}
		var inflight []channel.Item
		settled := map[uint64]int{}
		apply := func(e channel.Event) {
			acts, err := m.Step(e)
			if err != nil {
				t.Fatalf("%T in %s: %v", e, m.State(), err)
			}
			for _, a := range acts {
				switch a := a.(type) {
				case channel.Transmit:
					inflight = append(inflight, a.Items...)
				case channel.Delivered:
					for _, it := range a.Items {
						settled[it.Seq]++
					}
				case channel.Failed:
					t.Fatalf("items failed: %s %s", a.Code, a.Msg)
				}
			}
		}
		apply(channel.Connected{Watermark: rx.watermark})
		sent := 0
		for sent < n || len(m.Pending()) > 0 {
			switch {
			case m.State() == channel.Reconnecting:
				apply(channel.RetryDue{})
				inflight = nil
				apply(channel.Connected{Watermark: rx.watermark})
			case sent < n && rapid.Bool().Draw(t, "enqueue"):
				apply(channel.Enqueue{Data: sent})
				sent++
			case len(inflight) > 0 && rapid.IntRange(0, 3).Draw(t, "deliver") > 0:
				k := rapid.IntRange(1, len(inflight)).Draw(t, "k")
				for _, it := range inflight[:k] {
					rx.take(it)
				}
				inflight = inflight[k:]
				if rapid.Bool().Draw(t, "ack") {
					apply(channel.Ack{Seq: rx.watermark})
				}
			case rapid.IntRange(0, 9).Draw(t, "loss") == 0:
				apply(channel.TransportLost{})
			default:
				for _, it := range inflight {
					rx.take(it)
				}
				inflight = nil
				apply(channel.Ack{Seq: rx.watermark})
			}
		}
		if len(rx.seen) != n {
			t.Fatalf("receiver saw %d of %d", len(rx.seen), n)
		}
		for i, v := range rx.seen {
			if v != i {
				t.Fatalf("receiver saw %v: out of order at %d", rx.seen, i)
			}
		}
		for s := uint64(1); s <= uint64(n); s++ {
			if settled[s] != 1 {
				t.Fatalf("item %d settled %d times", s, settled[s])
			}
		}
	})
}

// TestProperty12_ChannelRetryOnFailure: after a transport loss the channel
// redials up to Retries times, each delay at least double the previous, and
// then fails every pending item exactly once with DELIVERY_FAILED.
func TestProperty12_ChannelRetryOnFailure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		retries := rapid.IntRange(1, 6).Draw(t, "retries")
		base := time.Duration(rapid.IntRange(1, 1000).Draw(t, "baseMs")) * time.Millisecond
		m, _ := channel.New(channel.Config{Retries: retries, Base: base})
		mustStep(t, m, channel.Connected{})
		k := rapid.IntRange(1, 20).Draw(t, "pending")
		for i := 0; i < k; i++ {
			mustStep(t, m, channel.Enqueue{Data: i})
		}
		acts := mustStep(t, m, channel.TransportLost{})
		var delays []time.Duration
		failed := map[uint64]int{}
		for round := 0; ; round++ {
			if round > retries+1 {
				t.Fatal("never gave up")
			}
			var scheduled bool
			for _, a := range acts {
				switch a := a.(type) {
				case channel.Schedule:
					delays = append(delays, a.Delay)
					scheduled = true
				case channel.Failed:
					if a.Code != channel.ReasonDeliveryFailed {
						t.Fatalf("failed with %s", a.Code)
					}
					for _, it := range a.Items {
						failed[it.Seq]++
					}
				}
			}
			if !scheduled {
				break
			}
			mustStep(t, m, channel.RetryDue{})
			acts = mustStep(t, m, channel.DialFailed{Err: errors.New("refused")})
		}
		if len(delays) != retries {
			t.Fatalf("%d redials scheduled, want %d", len(delays), retries)
		}
		for i := 1; i < len(delays); i++ {
			if delays[i] < 2*delays[i-1] {
				t.Fatalf("delay %v after %v is not at least double", delays[i], delays[i-1])
			}
		}
		if m.State() != channel.Closed || len(failed) != k {
			t.Fatalf("state %s, %d of %d items failed", m.State(), len(failed), k)
		}
		for s, c := range failed {
			if c != 1 {
				t.Fatalf("item %d failed %d times", s, c)
			}
		}
		if _, err := m.Step(channel.Enqueue{}); !errors.Is(err, channel.ErrInvalidTransition) {
			t.Fatal("a closed channel accepted a message")
		}
	})
}

func mustStep(t *rapid.T, m *channel.Machine, e channel.Event) []channel.Action {
	acts, err := m.Step(e)
	if err != nil {
		t.Fatalf("%T: %v", e, err)
	}
	return acts
}

func TestRestoreContinuesSequence(t *testing.T) {
	m, acts := channel.Restore(channel.Config{}, []channel.Item{{Seq: 7, Data: "b"}, {Seq: 5, Data: "a"}}, 3)
	if _, ok := acts[0].(channel.Dial); !ok || m.NextSeq() != 8 {
		t.Fatalf("restore: next %d, actions %v", m.NextSeq(), acts)
	}
	acts, _ = m.Step(channel.Connected{Watermark: 5})
	var delivered, transmitted []uint64
	for _, a := range acts {
		switch a := a.(type) {
		case channel.Delivered:
			for _, it := range a.Items {
				delivered = append(delivered, it.Seq)
			}
		case channel.Transmit:
			for _, it := range a.Items {
				transmitted = append(transmitted, it.Seq)
			}
		}
	}
	if fmt.Sprint(delivered) != "[5]" || fmt.Sprint(transmitted) != "[7]" {
		t.Fatalf("delivered %v transmitted %v", delivered, transmitted)
	}
}

// A channel restored after a crash numbers on past what the receiver took,
// even when those sequences were never written to the outbox: the sender
// was killed after the receiver took 4 and 5 but wrote only 3. Reused
// numbers would be taken for duplicates, acknowledged and dropped.
func TestRestoreNumbersPastTheReceiversWatermark(t *testing.T) {
	m, _ := channel.Restore(channel.Config{}, []channel.Item{{Seq: 3, Data: "a"}}, 3)
	acts, err := m.Step(channel.Connected{Watermark: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) == 0 || m.Pending() != nil && len(m.Pending()) != 0 {
		t.Fatalf("after connecting at watermark 5: actions %v, pending %v", acts, m.Pending())
	}
	it, transmit, err := m.Enqueue("new")
	if err != nil || !transmit || it.Seq != 6 {
		t.Fatalf("next envelope got seq %d (transmit %v, err %v), want 6", it.Seq, transmit, err)
	}
	// A fresh machine meeting a receiver that already counts further (a
	// channel ID reused by a restored channel whose items were all settled)
	// does the same.
	m2, _ := channel.New(channel.Config{})
	if _, err := m2.Step(channel.Connected{Watermark: 9}); err != nil {
		t.Fatal(err)
	}
	if it, _, _ := m2.Enqueue("x"); it.Seq != 10 {
		t.Fatalf("fresh machine at watermark 9 numbered %d, want 10", it.Seq)
	}
}

// The receiver may have queued more than it handled (a slow agent): a
// restored channel numbers past what it took, not only past its
// watermark, settles only what it handled, and takes its later acks.
func TestRestoreNumbersPastWhatTheReceiverQueued(t *testing.T) {
	m, _ := channel.Restore(channel.Config{}, []channel.Item{{Seq: 1, Data: "old1"}}, 3)
	acts, err := m.Step(channel.Connected{Watermark: 0, Taken: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if _, ok := a.(channel.Delivered); ok {
			t.Fatalf("settled on connecting, with nothing handled: %v", acts)
		}
	}
	if it, _, _ := m.Enqueue("new1"); it.Seq != 5 {
		t.Fatalf("next envelope got seq %d, want 5", it.Seq)
	}
	if _, err := m.Step(channel.Ack{Seq: 4}); err != nil {
		t.Fatalf("the receiver's ack of what it had queued: %v", err)
	}
	if p := m.Pending(); len(p) != 1 || p[0].Seq != 5 {
		t.Fatalf("pending after the ack of 4: %v, want only 5", p)
	}
}

func TestNackFailsOneItem(t *testing.T) {
	m := machineIn(t, channel.Open)
	for i := 0; i < 3; i++ {
		m.Step(channel.Enqueue{Data: i})
	}
	acts, err := m.Step(channel.Nack{Seq: 2, Code: "TIER_VIOLATION", Msg: "no"})
	if err != nil || len(acts) != 1 {
		t.Fatal(err, acts)
	}
	f := acts[0].(channel.Failed)
	if f.Code != "TIER_VIOLATION" || f.Items[0].Seq != 2 || len(m.Pending()) != 2 {
		t.Fatalf("%+v pending %d", f, len(m.Pending()))
	}
	if _, err := m.Step(channel.Ack{Seq: 9}); err == nil {
		t.Fatal("ack beyond what was sent accepted")
	}
}

// Machine.Enqueue (the sender's allocation-free path) must do exactly what
// Step(Enqueue{}) does, in every state the machine can reach.
func TestEnqueueMatchesStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := channel.Config{Retries: rapid.IntRange(0, 3).Draw(t, "retries"), Base: time.Millisecond}
		a, _ := channel.New(cfg)
		b, _ := channel.New(cfg)
		for i := 0; i < 60; i++ {
			e := rapid.SampledFrom([]channel.Event{channel.Enqueue{Data: i}, channel.Connected{}, channel.DialFailed{},
				channel.RetryDue{}, channel.TransportLost{}, channel.Ack{Seq: uint64(i % 3)}, channel.Close{}}).Draw(t, "event")
			if _, ok := e.(channel.Enqueue); !ok {
				actsA, errA := a.Step(e)
				actsB, errB := b.Step(e)
				if (errA == nil) != (errB == nil) || !reflect.DeepEqual(actsA, actsB) {
					t.Fatalf("machines diverged on %T", e)
				}
				continue
			}
			acts, errA := a.Step(channel.Enqueue{Data: i})
			it, transmit, errB := b.Enqueue(i)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("Step error %v, Enqueue error %v", errA, errB)
			}
			var want []channel.Action
			if transmit {
				want = []channel.Action{channel.Transmit{Items: []channel.Item{it}}}
			}
			if !reflect.DeepEqual(acts, want) {
				t.Fatalf("Step returned %v, Enqueue %v (transmit %v)", acts, it, transmit)
			}
			if a.State() != b.State() || a.NextSeq() != b.NextSeq() || !reflect.DeepEqual(a.Pending(), b.Pending()) {
				t.Fatal("machines diverged after Enqueue")
			}
		}
	})
}

// An idle channel that lost its transport redials to stay ready; an item
// enqueued as its last redial is under way must get every redial of its
// own, not fail when that one does. (`nova-node send` to a node stopped
// 40 s earlier failed in 0.4 s with "gave up after 3 retries", none of
// them for its envelope.) An item enqueued behind pending ones shares
// their remaining redials.
func TestItemEnqueuedIntoIdleRedialsGetsAllRetries(t *testing.T) {
	m, _ := channel.New(channel.Config{Retries: 3, Base: time.Millisecond})
	step := func(e channel.Event) []channel.Action {
		t.Helper()
		acts, err := m.Step(e)
		if err != nil {
			t.Fatalf("%T in %s: %v", e, m.State(), err)
		}
		return acts
	}
	step(channel.Connected{})
	step(channel.TransportLost{})
	step(channel.RetryDue{})
	step(channel.DialFailed{}) // attempt 2
	step(channel.RetryDue{})
	step(channel.DialFailed{}) // attempt 3
	step(channel.RetryDue{})   // the last redial is under way
	if !m.Fresh() {
		t.Fatal("a reconnecting channel with nothing pending is not Fresh")
	}
	step(channel.Enqueue{Data: "late"})
	if m.Fresh() || m.Attempt() != 0 {
		t.Fatalf("after the enqueue: fresh %v, attempt %d", m.Fresh(), m.Attempt())
	}
	var delays []time.Duration
	for range 10 {
		acts := step(channel.DialFailed{})
		if m.State() == channel.Closed {
			break
		}
		for _, a := range acts {
			if s, ok := a.(channel.Schedule); ok {
				delays = append(delays, s.Delay)
			}
		}
		step(channel.RetryDue{})
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	if !slices.Equal(delays, want) {
		t.Fatalf("redials for the late item after %v, want %v", delays, want)
	}

	// Behind a pending item, a new one shares the schedule.
	m, _ = channel.New(channel.Config{Retries: 3, Base: time.Millisecond})
	step(channel.Connected{})
	step(channel.Enqueue{Data: "first"})
	step(channel.TransportLost{})
	step(channel.RetryDue{})
	step(channel.DialFailed{})
	if m.Fresh() {
		t.Fatal("a channel with a pending item is Fresh")
	}
	step(channel.Enqueue{Data: "second"})
	if m.Attempt() != 2 {
		t.Fatalf("attempt %d after an enqueue behind a pending item, want 2", m.Attempt())
	}
}

// TestChannelParksWhileThePeerIsAway: with Park, a channel whose redials
// are spent keeps its items (none fails), dials again on a schedule that
// doubles up to AwayMax or at once on Wake, delivers them in order once
// connected, and fails exactly the items its owner expires; parked with
// none left, it closes.
func TestChannelParksWhileThePeerIsAway(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		retries := rapid.IntRange(0, 4).Draw(t, "retries")
		base := time.Duration(rapid.IntRange(1, 100).Draw(t, "baseMs")) * time.Millisecond
		awayMax := time.Duration(rapid.IntRange(1, 5000).Draw(t, "awayMaxMs")) * time.Millisecond
		m, _ := channel.New(channel.Config{Retries: retries, Base: base, Park: true, AwayMax: awayMax})
		mustStep(t, m, channel.Connected{})
		k := rapid.IntRange(1, 20).Draw(t, "pending")
		for i := 0; i < k; i++ {
			mustStep(t, m, channel.Enqueue{Data: i})
		}
		acts := mustStep(t, m, channel.TransportLost{})
		for m.State() != channel.Away {
			for _, a := range acts {
				if f, ok := a.(channel.Failed); ok {
					t.Fatalf("items failed before parking: %v", f)
				}
			}
			mustStep(t, m, channel.RetryDue{})
			acts = mustStep(t, m, channel.DialFailed{})
		}
		var last time.Duration
		polls := rapid.IntRange(0, 8).Draw(t, "polls")
		for i := 0; i < polls; i++ {
			var d time.Duration
			for _, a := range acts {
				if s, ok := a.(channel.Schedule); ok {
					d = s.Delay
				}
			}
			if d <= 0 || d > awayMax || d < last {
				t.Fatalf("poll %d scheduled in %v (last %v, max %v)", i, d, last, awayMax)
			}
			last = d
			if rapid.Bool().Draw(t, "wake") {
				// The peer seen again: a whole schedule of redials, all
				// failing, then parked again with every item.
				acts = mustStep(t, m, channel.Wake{})
				if m.State() != channel.Reconnecting {
					t.Fatalf("woken: %s", m.State())
				}
				for m.State() != channel.Away {
					acts = mustStep(t, m, channel.DialFailed{})
					for _, a := range acts {
						if f, ok := a.(channel.Failed); ok {
							t.Fatalf("items failed after a wake: %v", f)
						}
					}
					if m.State() == channel.Reconnecting {
						mustStep(t, m, channel.RetryDue{})
					}
				}
				last = 0 // the polls start over
			} else {
				mustStep(t, m, channel.RetryDue{})
				if _, err := m.Step(channel.Wake{}); err == nil {
					t.Fatal("a second dial while one is under way")
				}
				acts = mustStep(t, m, channel.DialFailed{})
			}
			if m.State() != channel.Away || len(m.Pending()) != k {
				t.Fatalf("after a failed poll: %s with %d of %d items", m.State(), len(m.Pending()), k)
			}
		}
		// The owner expires some.
		var expire []uint64
		for s := uint64(1); s <= uint64(k); s++ {
			if rapid.Bool().Draw(t, "expire") {
				expire = append(expire, s)
			}
		}
		acts = mustStep(t, m, channel.Expire{Seqs: expire, Msg: "ttl"})
		failed := 0
		for _, a := range acts {
			if f, ok := a.(channel.Failed); ok {
				if f.Code != channel.ReasonDeliveryFailed {
					t.Fatalf("expired with %s", f.Code)
				}
				failed += len(f.Items)
			}
		}
		if failed != len(expire) {
			t.Fatalf("%d items failed, %d expired", failed, len(expire))
		}
		if len(expire) == k {
			if m.State() != channel.Closed {
				t.Fatalf("parked with nothing left: %s", m.State())
			}
			return
		}
		mustStep(t, m, channel.Wake{})
		acts = mustStep(t, m, channel.Connected{})
		var sent []uint64
		for _, a := range acts {
			if tr, ok := a.(channel.Transmit); ok {
				for _, it := range tr.Items {
					sent = append(sent, it.Seq)
				}
			}
		}
		if m.State() != channel.Open || len(sent) != k-len(expire) {
			t.Fatalf("back: %s, %d transmitted, want %d", m.State(), len(sent), k-len(expire))
		}
		for i := 1; i < len(sent); i++ {
			if sent[i] <= sent[i-1] {
				t.Fatalf("retransmitted out of order: %v", sent)
			}
		}
	})
}
