package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// Requests share one expiry timer per router: each still fails with a
// deadline error at its own timeout (not before, and not at another
// request's), a later request with a long timeout is answered, and closing
// the router ends a wait that has no timeout at all.
func TestRequestsExpireEachAtItsOwnDeadline(t *testing.T) {
	routers, f := mockPair(t)
	release := make(chan struct{})
	routers[1].Handle("a1", func(ctx context.Context, env *envelope.Envelope) (any, error) {
		<-release
		return "late", nil
	})
	// Far apart, so that the order holds on a loaded machine, where each
	// expiry may be seen a second late.
	timeouts := []time.Duration{3 * time.Second, 200 * time.Millisecond, 1500 * time.Millisecond}
	took := make([]time.Duration, len(timeouts))
	errs := make([]error, len(timeouts))
	var wg sync.WaitGroup
	for i, timeout := range timeouts {
		wg.Go(func() {
			env, err := f.New("a0", "a1", envelope.TypeRequest, nil)
			if err != nil {
				errs[i] = err
				return
			}
			start := time.Now()
			_, _, errs[i] = routers[0].RequestWithin(t.Context(), env, timeout)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, timeout := range timeouts {
		if !errors.Is(errs[i], context.DeadlineExceeded) || took[i] < timeout || took[i] > timeout+time.Second {
			t.Errorf("request with a %v timeout: %v after %v, want a deadline error at its timeout", timeout, errs[i], took[i])
		}
	}
	if took[1] >= took[2] || took[2] >= took[0] {
		t.Errorf("expiry order %v for timeouts %v", took, timeouts)
	}
	close(release)

	routers[1].Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) { return env.Payload, nil })
	env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"hi"`))
	resp, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second)
	if err != nil || string(resp.Payload) != `"hi"` {
		t.Fatalf("request after the expiries: %v", err)
	}

	block := make(chan struct{})
	defer close(block)
	handling := make(chan struct{}, 1)
	routers[1].Handle("a1", func(context.Context, *envelope.Envelope) (any, error) {
		select {
		case handling <- struct{}{}:
		default:
		}
		<-block
		return nil, nil
	})
	got := make(chan error, 1)
	go func() {
		env, _ := f.New("a0", "a1", envelope.TypeRequest, nil)
		_, _, err := routers[0].RequestWithin(context.Background(), env, 0)
		got <- err
	}()
	<-handling // the request waits for its answer
	routers[0].Close()
	select {
	case err := <-got:
		if !errors.Is(err, protocol.ErrChannelClosed) {
			t.Fatalf("request pending at Close: %v, want CHANNEL_CLOSED", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request without a timeout still waits after Close")
	}
}

// A handler owns the envelope it is given: scribbling over its header,
// metadata and payload changes nothing the router does with the request
// (the answer still goes to the asker, in its thread).
func TestHandlerScribblingOnItsEnvelope(t *testing.T) {
	routers, f := mockPair(t)
	routers[1].Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) {
		for i := range env.Payload {
			env.Payload[i] = 'X'
		}
		env.Sender, env.Recipient, env.ID, env.CorrelationID = "evil", "nobody", "forged", "other-thread"
		if env.Metadata != nil {
			env.Metadata.Tier = 0
		}
		return "ok", nil
	})
	for range 3 {
		env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"hello"`))
		resp, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.Payload) != `"ok"` || resp.CorrelationID != env.ID || resp.Type != envelope.TypeResponse {
			t.Fatalf("answer %s in thread %q, want \"ok\" in %q", resp.Payload, resp.CorrelationID, env.ID)
		}
	}
}

// countingStore counts watermark writes.
type countingStore struct {
	*protocol.MemStore
	marks atomic.Int64
}

func (s *countingStore) SaveWatermarks(w map[string]uint64) error {
	s.marks.Add(1)
	return s.MemStore.SaveWatermarks(w)
}

// A receiver that gets a message now and then does not write its
// watermark for each one (a commit and an fsync per message on bbolt), but
// it does write it within about a second, without being closed.
func TestWatermarksWrittenBehindTheTraffic(t *testing.T) {
	store := &countingStore{MemStore: protocol.NewMemStore()}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 1 {
			return []protocol.Option{protocol.WithStore(store)}
		}
		return nil
	})
	var got atomic.Int64
	routers[1].Handle("a1", func(context.Context, *envelope.Envelope) (any, error) { got.Add(1); return nil, nil })
	const n = 20
	start := time.Now()
	for range n {
		env, _ := f.New("a0", "a1", envelope.TypeNotification, nil)
		if _, err := routers[0].Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Millisecond) // the scenario's pace: one persister pass or more apart
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if g := got.Load(); g < n {
			return fmt.Errorf("%d of %d delivered", g, n)
		}
		return nil
	})
	if writes, seconds := store.marks.Load(), time.Since(start).Seconds(); float64(writes) > seconds+1 {
		t.Fatalf("%d watermark writes in %.2f s for %d messages", writes, seconds, n)
	}
	waitfor.Eventually(t, 3*time.Second, func() error {
		marks, _ := store.LoadWatermarks()
		best := uint64(0)
		for _, w := range marks {
			best = max(best, w)
		}
		if best != n {
			return fmt.Errorf("stored watermark %d, want %d", best, n)
		}
		return nil
	})
}

// The persister sleeps while it has nothing to write, and wakes when it
// has: envelopes posted, after a quiet spell, to a peer that went away are
// in the outbox within a pass or two, without a Close.
func TestPersisterWakesForEnvelopesToAPeerGone(t *testing.T) {
	store := protocol.NewMemStore()
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 {
			return []protocol.Option{protocol.WithStore(store)}
		}
		return nil
	})
	env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"warm"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the scenario: the persister goes idle, every pass since found nothing to write
	routers[1].Close()
	const n = 5
	for range n {
		env, _ := f.New("a0", "a1", envelope.TypeNotification, nil)
		if _, err := routers[0].Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Eventually(t, 2*time.Second, func() error {
		if items := outboxItems(store); items != n {
			return fmt.Errorf("%d of %d envelopes to the gone peer in the outbox", items, n)
		}
		return nil
	})
}

// A request inside an existing thread (its CorrelationID set, as
// `nova-node send --correlation-id` does) is answered: the answer carries
// the thread, not the request's ID, and the requester is matched by thread
// and agent pair. Until session 6 such a request waited out its timeout.
// Two at once between the same agents in one thread cannot be told apart:
// the second is refused.
func TestRequestInsideAThread(t *testing.T) {
	routers, f := mockPair(t)
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	defer free() // a failed check must not leave the handler held, and Close waiting for it
	var calls atomic.Int32
	routers[1].Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) {
		if calls.Add(1) == 2 {
			<-release // the second call waits: a request in flight
		}
		return env.Payload, nil
	})
	root, _ := f.New("a0", "a1", envelope.TypeRequest, json.RawMessage(`"root"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), root, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	inThread := func(payload string) *envelope.Envelope {
		env, _ := f.New("a0", "a1", envelope.TypeRequest, json.RawMessage(payload))
		env.CorrelationID = root.ID
		return env
	}
	first := make(chan error, 1)
	go func() {
		resp, _, err := routers[0].RequestWithin(t.Context(), inThread(`"one"`), 5*time.Second)
		if err == nil && string(resp.Payload) != `"one"` {
			err = fmt.Errorf("answer %s, want \"one\"", resp.Payload)
		}
		first <- err
	}()
	waitfor.Eventually(t, 5*time.Second, func() error {
		if c := calls.Load(); c < 2 {
			return fmt.Errorf("%d handler calls, want 2", c)
		}
		return nil
	})
	if _, _, err := routers[0].RequestWithin(t.Context(), inThread(`"two"`), 5*time.Second); !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("a second request between the same agents in the same thread: %v, want INVALID_MESSAGE", err)
	}
	free()
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("the request inside the thread: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the request inside the thread was not answered")
	}
	if n := len(routers[0].Thread(root.ID)); n != 6-2 { // root, one and their answers; "two" was refused before leaving
		t.Errorf("thread holds %d envelopes, want 4", n)
	}
}

// An agent that builds its own answer to a request inside a thread may
// correlate it with the request's ID rather than the thread's: it is
// matched too (found by review in session 6).
func TestAnswerNamingTheRequestInsideAThread(t *testing.T) {
	routers, f := mockPair(t)
	routers[1].Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) {
		ans, err := f.Reply(env, envelope.TypeResponse, json.RawMessage(`"mine"`))
		if err != nil {
			return nil, err
		}
		ans.CorrelationID = env.ID // the request, not its thread
		return ans, nil
	})
	root, _ := f.New("a0", "a1", envelope.TypeRequest, json.RawMessage(`"root"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), root, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	env, _ := f.New("a0", "a1", envelope.TypeRequest, json.RawMessage(`"in"`))
	env.CorrelationID = root.ID
	resp, _, err := routers[0].RequestWithin(t.Context(), env, 5*time.Second)
	if err != nil || string(resp.Payload) != `"mine"` {
		t.Fatalf("answer %v, %v", resp, err)
	}
}

// postToGonePeer warms routers[0]'s channel to routers[1] with a request,
// closes routers[1], and posts n notifications to it from routers[0].
func postToGonePeer(t *testing.T, routers [2]*protocol.Router, f *envelope.Factory, n int) {
	t.Helper()
	env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"warm"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	routers[1].Close()
	for range n {
		env, _ := f.New("a0", "a1", envelope.TypeNotification, nil)
		if _, err := routers[0].Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
}

// outboxItems counts the envelopes in store's outbox.
func outboxItems(store protocol.Store) int {
	chans, _ := store.LoadOutbox()
	items := 0
	for _, c := range chans {
		items += len(c.Items)
	}
	return items
}

// failingStore fails its first fails outbox writes, like a full disk.
type failingStore struct {
	*protocol.MemStore
	fails atomic.Int64
}

func (s *failingStore) SaveOutbox(ops []protocol.OutboxOp) error {
	if s.fails.Add(-1) >= 0 {
		return errors.New("disk full")
	}
	return s.MemStore.SaveOutbox(ops)
}

// Envelopes whose outbox write failed are written by a later pass (a failed
// pass used to leave them marked as written, so they never reached the
// disk), and ChannelInfo.Stored counts only those the store took.
func TestOutboxWriteFailureIsRetried(t *testing.T) {
	store := &failingStore{MemStore: protocol.NewMemStore()}
	store.fails.Store(3)
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 { // retries of 2+4+8 s: the envelopes stay pending while the test looks
			return []protocol.Option{protocol.WithStore(store), protocol.WithRetry(3, 2*time.Second)}
		}
		return nil
	})
	const n = 5
	postToGonePeer(t, routers, f, n)
	waitfor.Eventually(t, 5*time.Second, func() error {
		items := outboxItems(store)
		pending, stored := 0, 0
		for _, c := range routers[0].Channels() {
			pending, stored = pending+c.Pending, stored+c.Stored
		}
		// n, or n+1 when the warm-up request was not acknowledged before
		// the peer closed (its answer showed it arrived).
		if items < n || pending != items || stored != items {
			return fmt.Errorf("%d envelopes in the outbox (want %d or more), %d pending, %d reported stored", items, n, pending, stored)
		}
		return nil
	})
	if store.fails.Load() >= 0 {
		t.Fatalf("the store failed only %d of 3 writes: the test did not exercise a failure", 3-store.fails.Load()-1)
	}
}

// typeSink records the events of one type.
type typeSink struct {
	typ string
	mu  sync.Mutex
	evs []protocol.Event
}

func (s *typeSink) Emit(e protocol.Event) {
	if e.Type == s.typ {
		s.mu.Lock()
		s.evs = append(s.evs, e)
		s.mu.Unlock()
	}
}

// count is how many of the events recorded name envelope id.
func (s *typeSink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.evs {
		if e.EnvelopeID == id {
			n++
		}
	}
	return n
}

// A peer that stops (its streams reset) is not a security event: every
// node stopping used to leave a PROTOCOL_ERROR in its peers' audit logs.
func TestPeerStoppingIsNoSecurityEvent(t *testing.T) {
	sink := &typeSink{typ: protocol.EvtSecurityRaised}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 1 {
			return []protocol.Option{protocol.WithEventSink(sink)}
		}
		return nil
	})
	env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"warm"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	routers[0].Close()                 // resets its streams to routers[1]
	time.Sleep(300 * time.Millisecond) // an observation window: routers[1]'s readers see the reset, and no event may follow
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.evs) > 0 {
		t.Fatalf("security events for a peer that stopped: %+v", sink.evs)
	}
}

// dropFailingStore fails its first write that drops a channel.
type dropFailingStore struct {
	*protocol.MemStore
	failed atomic.Bool
}

func (s *dropFailingStore) SaveOutbox(ops []protocol.OutboxOp) error {
	for _, op := range ops {
		if op.Drop && s.failed.CompareAndSwap(false, true) {
			return errors.New("disk full")
		}
	}
	return s.MemStore.SaveOutbox(ops)
}

// A channel closed for good (its envelopes failed after the retries) is
// dropped from the outbox by a later pass when the write that dropped it
// failed: it used to stay on disk, and be restored with envelopes already
// reported DELIVERY_FAILED at the next start.
func TestOutboxDropFailureIsRetried(t *testing.T) {
	store := &dropFailingStore{MemStore: protocol.NewMemStore()}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 {
			return []protocol.Option{protocol.WithStore(store), protocol.WithRetry(1, 50*time.Millisecond)}
		}
		return nil
	})
	postToGonePeer(t, routers, f, 3)
	waitfor.Eventually(t, 5*time.Second, func() error {
		if !store.failed.Load() {
			return errors.New("no drop written yet")
		}
		chans, _ := store.LoadOutbox()
		if items := outboxItems(store); len(chans) > 0 || items > 0 {
			return fmt.Errorf("%d channels, %d envelopes still in the outbox after the channel failed", len(chans), items)
		}
		return nil
	})
}

// A Send whose channel gives up is one error event: the channel reports the
// envelope's failure, and Send, which waited for it, does not report it again.
// And a request answered just before its receiver stopped is no failure,
// though the receiver's coalesced ack of it never came: the answer proved
// it arrived.
func TestFailedSendIsOneErrorEvent(t *testing.T) {
	sink := &typeSink{typ: protocol.EvtErrorRaised}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 {
			return []protocol.Option{protocol.WithEventSink(sink), protocol.WithRetry(1, 10*time.Millisecond)}
		}
		return nil
	})
	warm, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"warm"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), warm, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	unacked := pending(routers[0]) // the receiver acks a request within 2 ms, not with its answer
	routers[1].Close()
	env, _ := f.New("a0", "a1", envelope.TypeNotification, nil)
	if _, err := routers[0].Send(t.Context(), env); !errors.Is(err, protocol.ErrDeliveryFailed) {
		t.Fatalf("send to a gone peer: %v, want DELIVERY_FAILED", err)
	}
	if n := sink.count(env.ID); n != 1 {
		t.Fatalf("%d error events for one failed send, want 1", n)
	}
	if unacked == 0 { // 60 of 60 runs had it pending; a stalled test goroutine may not
		t.Log("the answered request was acknowledged before the receiver stopped: its case is not exercised")
		return
	}
	if n := sink.count(warm.ID); n != 0 {
		t.Fatalf("the answered request reported as failed %d times", n)
	}
}

// A request counts as sent when its receiver acknowledges it, as a posted
// notification does: one that fails with DELIVERY_FAILED was not sent.
// (It used to be counted as sent when it was queued.)
func TestFailedRequestIsNotCountedSent(t *testing.T) {
	sent := &typeSink{typ: protocol.EvtMessageSent}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 {
			return []protocol.Option{protocol.WithEventSink(sent), protocol.WithRetry(1, 10*time.Millisecond)}
		}
		return nil
	})
	ok, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"hello"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), ok, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = waitfor.Within(5*time.Second, func() error {
		if sent.count(ok.ID) == 0 {
			return errors.New("not counted sent yet")
		}
		return nil
	})
	if n := sent.count(ok.ID); n != 1 {
		t.Fatalf("an answered request counted sent %d times, want 1", n)
	}
	routers[1].Close()
	lost, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"anyone?"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), lost, 10*time.Second); !errors.Is(err, protocol.ErrDeliveryFailed) {
		t.Fatalf("request to a gone peer: %v, want DELIVERY_FAILED", err)
	}
	if n := sent.count(lost.ID); n != 0 {
		t.Fatalf("a request that failed with DELIVERY_FAILED counted sent %d times", n)
	}
}

// A channel that closed (its redials spent) leaves the router's list: the
// next envelope to the pair opens a new channel, and status used to show
// the closed one next to it for good.
func TestClosedChannelLeavesTheList(t *testing.T) {
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 0 {
			return []protocol.Option{protocol.WithRetry(1, 10*time.Millisecond)}
		}
		return nil
	})
	warm, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"warm"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), warm, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	routers[1].Close()
	env, _ := f.New("a0", "a1", envelope.TypeNotification, nil)
	if _, err := routers[0].Send(t.Context(), env); !errors.Is(err, protocol.ErrDeliveryFailed) {
		t.Fatalf("send to a gone peer: %v, want DELIVERY_FAILED", err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if cs := routers[0].Channels(); len(cs) > 0 {
			return fmt.Errorf("closed channels still listed: %+v", cs)
		}
		return nil
	})
}
