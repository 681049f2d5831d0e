package testnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// recorder is the handler of a "sink" agent: it records payloads in the
// order the handler saw them, across restarts of its node.
type recorder struct {
	mu   sync.Mutex
	seen []int
	work time.Duration // simulated work per envelope
}

func (r *recorder) handle(_ context.Context, env *envelope.Envelope) (any, error) {
	if r.work > 0 {
		time.Sleep(r.work) // the agent's own work, not test synchronisation
	}
	var v int
	if err := json.Unmarshal(env.Payload, &v); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.seen = append(r.seen, v)
	r.mu.Unlock()
	return nil, nil
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// exactlyOnceInOrder checks the recorder saw 0..n-1, each once, in order.
func (r *recorder) exactlyOnceInOrder(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) != n {
		t.Fatalf("handler saw %d envelopes, want %d", len(r.seen), n)
	}
	for i, v := range r.seen {
		if v != i {
			t.Fatalf("handler saw %d at position %d (duplicate or out of order)", v, i)
		}
	}
}

func (r *recorder) register(t testing.TB) func(*node.Node) {
	return func(n *node.Node) {
		card := node.AgentConfig{Name: "sink", Capabilities: []node.CapabilityConfig{{ID: "sink"}}}.Card()
		if _, err := n.RegisterAgent(card, r.handle); err != nil {
			t.Fatal(err)
		}
	}
}

// sinkPair starts two connected nodes that know each other's cards, with
// rec's "sink" agent on the second.
func sinkPair(t *testing.T, rec *recorder, opts ...testnet.Option) *testnet.Net {
	t.Helper()
	net := testnet.New(t, 2, opts...)
	rec.register(t)(net.Nodes[1])
	net.Connect(0, 1)
	net.WaitForCards()
	return net
}

func postN(t *testing.T, n *node.Node, from int, to int) []string {
	t.Helper()
	var ids []string
	for i := from; i < to; i++ {
		env, err := n.NewEnvelope("a0", "sink", envelope.TypeNotification, i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Router().Post(t.Context(), env); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		ids = append(ids, env.ID)
	}
	return ids
}

// waitTakenAndAcked waits until rec has n envelopes and the sender's
// channels hold none unacknowledged: the channel is idle.
func waitTakenAndAcked(t *testing.T, net *testnet.Net, rec *recorder, n int) {
	t.Helper()
	waitfor.Eventually(t, 5*time.Second, func() error {
		if got := rec.len(); got < n {
			return fmt.Errorf("%d of %d received", got, n)
		}
		for _, c := range net.Nodes[0].Router().Channels() {
			if c.Pending > 0 {
				return fmt.Errorf("%d envelopes not yet acknowledged", c.Pending)
			}
		}
		return nil
	})
}

// TestReceiverRestartMidStream: the receiving node is stopped in the middle
// of 1,000 envelopes and started again from the same data dir. The sender's
// channel goes reconnecting -> open (or, if the restart outlasts the
// redials, away -> open), and the receiver's handler sees each of the 1,000
// exactly once, in order.
func TestReceiverRestartMidStream(t *testing.T) {
	rec := &recorder{work: 500 * time.Microsecond}
	// With a time to live the envelopes wait however long the restart takes
	// on a loaded machine (the redials alone cover 0.7 s).
	net := sinkPair(t, rec, withTTL(time.Minute))
	logEventsOnFailure(t, net.Nodes[0])
	postN(t, net.Nodes[0], 0, 1000)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if rec.len() < 300 {
			return fmt.Errorf("%d received", rec.len())
		}
		return nil
	})
	killedAt := rec.len()
	sub := net.Nodes[0].Observer().Subscribe(100000)
	defer sub.Close()
	net.Restart(1, rec.register(t))
	if killedAt >= 900 {
		t.Fatalf("the receiver had already taken %d envelopes: not a mid-stream restart", killedAt)
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		if rec.len() < 1000 {
			return fmt.Errorf("%d of 1000 received after the restart", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 1000)
	var seen []string
	waitfor.Eventually(t, 5*time.Second, func() error {
		for {
			select {
			case e := <-sub.C:
				if e.Type == protocol.EvtChannelChanged {
					seen = append(seen, e.Detail)
				}
				continue
			default:
			}
			break
		}
		if !slices.Contains(seen, "open -> reconnecting") || !slices.Contains(seen, "reconnecting -> open") && !slices.Contains(seen, "away -> open") {
			return fmt.Errorf("channel transitions: %v", seen)
		}
		return nil
	})
}

// TestConnectionDroppedRepeatedly: the connection is cut after every 100
// envelopes posted while 1,000 flow (each cut lands with envelopes of the
// batch still queued or in flight); each still arrives exactly once, in
// order.
func TestConnectionDroppedRepeatedly(t *testing.T) {
	rec := &recorder{work: 20 * time.Microsecond}
	net := sinkPair(t, rec)
	drops, midStream := 0, 0
	for from := 0; from < 1000; from += 100 {
		postN(t, net.Nodes[0], from, from+100)
		if rec.len() < from+100 {
			midStream++ // this cut catches envelopes of the batch undelivered
		}
		_ = net.Nodes[0].Host().Network().ClosePeer(net.Nodes[1].ID())
		drops++
	}
	waitfor.Eventually(t, 30*time.Second, func() error {
		if rec.len() < 1000 {
			return fmt.Errorf("%d of 1000 received", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 1000)
	if drops != 10 || midStream < 3 {
		t.Fatalf("%d drops, %d with envelopes undelivered: the test did not cut mid-stream", drops, midStream)
	}
}

// TestReceiverNeverReturns: every envelope pending for a node that does not
// come back fails exactly once with DELIVERY_FAILED after the retries; and
// before that, the sender's channel scheduled exactly Retries redials, each
// delay at least double the one before (property 12, over the network).
func TestReceiverNeverReturns(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec)
	postN(t, net.Nodes[0], 0, 10)
	waitTakenAndAcked(t, net, rec, 10)
	gone := net.Nodes[1].ID()
	net.Kill(1)
	ids := postN(t, net.Nodes[0], 10, 40)
	failures := func() map[string]int {
		m := map[string]int{}
		for _, e := range net.Nodes[0].Observer().Recent(0) {
			if e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed && e.EnvelopeID != "" {
				m[e.EnvelopeID]++
			}
		}
		return m
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if f := failures(); len(f) < len(ids) {
			return fmt.Errorf("%d of %d failures reported", len(f), len(ids))
		}
		return nil
	})
	f := failures()
	for _, id := range ids {
		if f[id] != 1 {
			t.Fatalf("envelope %s reported %d times", id, f[id])
		}
	}
	if len(f) != len(ids) {
		t.Fatalf("%d failures for %d envelopes (delivered ones must not fail)", len(f), len(ids))
	}
	checkRedials(t, net.Nodes[0], gone)
}

// redialRe matches a channel event's "redial N in D" detail (a redial
// scheduled after a failure), as protocol's chanout emits it.
var redialRe = regexp.MustCompile(`^redial\s+(\d+)\s+in\s+([^\s:]+)(?:: the dial failed after \S+: .+)?$`)

// checkRedials checks, from sender's events, the redials its channels to
// peer p scheduled before the first DELIVERY_FAILED for p: attempts 1..
// Retries of the node's config in order, the first after RetryDelay, each
// next delay at least double the previous; and none after the failure.
func checkRedials(t *testing.T, sender *node.Node, p peer.ID) {
	t.Helper()
	cfg := sender.Config()
	var attempts []int
	var delays []time.Duration
	failed, after := false, 0
	for _, e := range sender.Observer().Recent(0) {
		if e.Peer != p {
			continue
		}
		if e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed {
			failed = true
			continue
		}
		detail := strings.TrimSpace(e.Detail)
		if e.Type != protocol.EvtChannelChanged || !strings.HasPrefix(detail, "redial") {
			continue
		}
		if detail == "redial now: an envelope to send" && !failed {
			// An envelope sent to the channel while it redialled with
			// nothing pending: its own schedule starts here.
			attempts, delays = nil, nil
			continue
		}
		if strings.HasPrefix(detail, "redial now") {
			t.Fatalf("channel event %q: the peer never came back, nothing could have been seen", detail)
		}
		m := redialRe.FindStringSubmatch(detail)
		if m == nil {
			t.Fatalf("channel event %q: not \"redial N in D\"", detail)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatalf("channel event %q: attempt: %v", detail, err)
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("channel event %q: delay: %v", detail, err)
		}
		if failed {
			after++
			continue
		}
		attempts = append(attempts, n)
		delays = append(delays, d)
	}
	if !failed {
		t.Fatal("no DELIVERY_FAILED event among the sender's events")
	}
	t.Logf("redials before DELIVERY_FAILED: attempts %v, delays %v", attempts, delays)
	if after > 0 {
		t.Errorf("%d redials scheduled after the channel gave up", after)
	}
	if len(attempts) != cfg.Retries {
		t.Fatalf("%d redials scheduled before DELIVERY_FAILED (attempts %v, delays %v), want Retries = %d", len(attempts), attempts, delays, cfg.Retries)
	}
	for i, n := range attempts {
		if n != i+1 {
			t.Fatalf("redial attempts %v, want 1..%d in order", attempts, cfg.Retries)
		}
	}
	if delays[0] < cfg.RetryDelay {
		t.Fatalf("first redial after %s, want at least RetryDelay = %s (delays %v)", delays[0], cfg.RetryDelay, delays)
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] < 2*delays[i-1] {
			t.Fatalf("redial %d after %s, less than double the previous %s (delays %v)", i+1, delays[i], delays[i-1], delays)
		}
	}
}

// TestSenderRestartKeepsOutbox: envelopes queued for an unreachable peer
// survive a restart of the sender and are delivered, once each, when the
// peer is back.
func TestSenderRestartKeepsOutbox(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithConfig(func(i int, c *node.Config) {
		c.Retries = 12 // keep retrying long enough for the restarts below
	}))
	bCfg := net.Nodes[1].Config()
	bCfg.Listen = nil
	for _, a := range net.Nodes[1].Host().Addrs() {
		bCfg.Listen = append(bCfg.Listen, a.String()+"")
	}
	bAddr := net.Nodes[1].Addrs()[0].String()
	net.Kill(1)
	postN(t, net.Nodes[0], 0, 20)
	net.Kill(0) // persists the outbox
	net.Start(1, bCfg, rec.register(t))
	aCfg := net.Nodes[0].Config()
	aCfg.Peers = []string{bAddr}
	net.Start(0, aCfg, nil)
	waitfor.Eventually(t, 20*time.Second, func() error {
		if rec.len() < 20 {
			return fmt.Errorf("%d of 20 received after the sender restarted", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 20)
}

// A posted envelope is reported sent once, when the receiving node
// acknowledges it, with both agents' tiers; and so is the answer a node
// sends back for a request (on the answering node).
func TestPostedEnvelopesReportedSentOnAck(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec)
	subs := []*node.Subscription{
		net.Nodes[0].Observer().Subscribe(1000, protocol.EvtMessageSent),
		net.Nodes[1].Observer().Subscribe(1000, protocol.EvtMessageSent),
	}
	for _, s := range subs {
		defer s.Close()
	}
	ids := postN(t, net.Nodes[0], 0, 5)
	answer, _, err := request(t, net.Nodes[0], "a0", "a1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	want := [2]map[string]bool{{}, {answer.ID: true}} // node 1 sent the answer
	for _, id := range ids {
		want[0][id] = true
	}
	for i, s := range subs {
		got := map[string]int{}
		waitfor.Eventually(t, 5*time.Second, func() error {
			for {
				select {
				case e := <-s.C:
					if e.Path == protocol.PathRemote && e.SourceTier >= 0 && e.TargetTier >= 0 {
						got[e.EnvelopeID]++
					}
					continue
				default:
				}
				break
			}
			for id := range want[i] {
				if got[id] != 1 {
					return fmt.Errorf("node %d: %s reported sent %d times", i, id, got[id])
				}
			}
			return nil
		})
	}
}

// The router keeps no hold on the caller's payload: an envelope posted to
// a local agent, whose handler runs after the call returns, and one posted
// to a remote agent, reach their agents as they were when posted, however
// the caller reuses its buffer afterwards.
func TestPostedPayloadIsNotTheCallers(t *testing.T) {
	net := testnet.New(t, 2)
	got := make(chan string, 2)
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	defer free() // a failed check must not leave the handler held, and Close waiting for it
	for i, n := range net.Nodes {
		card := node.AgentConfig{Name: fmt.Sprintf("keeper%d", i), Capabilities: []node.CapabilityConfig{{ID: "keep"}}}.Card()
		if _, err := n.RegisterAgent(card, func(_ context.Context, env *envelope.Envelope) (any, error) {
			<-release
			got <- string(env.Payload)
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()
	for _, to := range []string{"keeper0", "keeper1"} {
		env, err := net.Nodes[0].NewEnvelope("a0", to, envelope.TypeNotification, nil)
		if err != nil {
			t.Fatal(err)
		}
		buf := []byte(`"original"`)
		env.Payload = buf
		if _, err := net.Nodes[0].Router().Post(t.Context(), env); err != nil {
			t.Fatalf("post to %s: %v", to, err)
		}
		copy(buf, `"scribble"`)
	}
	free()
	for range 2 {
		select {
		case p := <-got:
			if p != `"original"` {
				t.Fatalf("an agent got %s, want \"original\"", p)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered")
		}
	}
}

// TestBacklogAcknowledgedWhileWorkedOff: a receiver whose agent is slower
// than the sender acknowledges what it delivered as it goes (within
// ackDelay), not only once its queue drained, so the sender does not hold
// the whole backlog (and a crash of the receiver redelivers only the last
// few milliseconds: TestReceiverKilledMidStream).
func TestBacklogAcknowledgedWhileWorkedOff(t *testing.T) {
	rec := &recorder{work: 2 * time.Millisecond}
	net := sinkPair(t, rec)
	postN(t, net.Nodes[0], 0, 200)
	waitfor.Eventually(t, 10*time.Second, func() error {
		pending := 0
		for _, c := range net.Nodes[0].Router().Channels() {
			pending += c.Pending
		}
		if seen := rec.len(); seen >= 150 {
			t.Fatalf("the agent took %d of 200 before the sender saw an ack covering 20 (%d pending)", seen, pending)
		} else if pending > 200-20 {
			return fmt.Errorf("%d pending, the agent took %d", pending, seen)
		}
		return nil
	})
	waitfor.Eventually(t, 10*time.Second, func() error {
		if rec.len() < 200 {
			return fmt.Errorf("%d of 200 received", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 200)
}

// deliveryFailures counts the DELIVERY_FAILED events node n reported.
func deliveryFailures(n *node.Node) int {
	c := 0
	for _, e := range n.Observer().Recent(0) {
		if e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed {
			c++
		}
	}
	return c
}

// logEventsOnFailure logs n's channel events and errors, with their
// times, when t fails: what each redial met.
func logEventsOnFailure(t *testing.T, n *node.Node) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		failed := false
		for _, e := range n.Observer().Recent(0) {
			first := e.Code == protocol.CodeDeliveryFailed && !failed
			failed = failed || first
			if e.Type == protocol.EvtChannelChanged || (e.Type == protocol.EvtErrorRaised && (first || e.Code != protocol.CodeDeliveryFailed)) {
				t.Logf("%s %s %s %s", e.Time.Format("15:04:05.000"), e.Type, e.Code, e.Detail)
			}
		}
	})
}

// waitChannelEvent waits for a channel event on sub whose detail starts
// with prefix.
func waitChannelEvent(t *testing.T, sub *node.Subscription, prefix string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-sub.C:
			if e.Type == protocol.EvtChannelChanged && strings.HasPrefix(e.Detail, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("no channel event %q within %s", prefix, timeout)
		}
	}
}

// TestReceiverBackBetweenRedials: the receiver is gone when the first redial
// runs and back before the second. The second redial must really dial
// (libp2p's dial backoff from the first failure would otherwise answer it)
// and the pending envelopes arrive, once each and in order, with no
// DELIVERY_FAILED.
func TestReceiverBackBetweenRedials(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		// Redials at 1, 3 and 7 s: the receiver, restarted after the first
		// failed, has 6 s to listen again even on a loaded machine (at
		// 0.5, 1.5 and 3.5 s it missed them once in a CI run).
		c.RetryDelay = time.Second
	}))
	postN(t, net.Nodes[0], 0, 10)
	waitfor.Eventually(t, 5*time.Second, func() error {
		if rec.len() < 10 {
			return fmt.Errorf("%d of 10 received", rec.len())
		}
		return nil
	})
	sub := net.Nodes[0].Observer().Subscribe(1000)
	defer sub.Close()
	logEventsOnFailure(t, net.Nodes[0])
	cfg := net.ConfigOf(1)
	net.Kill(1)
	postN(t, net.Nodes[0], 10, 20)
	waitChannelEvent(t, sub, "redial 2 in", 10*time.Second) // the first redial failed
	net.Start(1, cfg, rec.register(t))
	t.Logf("%s: receiver listening again", time.Now().Format("15:04:05.000"))
	waitfor.Eventually(t, 20*time.Second, func() error {
		if n := deliveryFailures(net.Nodes[0]); n > 0 {
			return fmt.Errorf("%d DELIVERY_FAILED: the later redials never dialled", n)
		}
		if rec.len() < 20 {
			return fmt.Errorf("%d of 20 received", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 20)
	if n := deliveryFailures(net.Nodes[0]); n > 0 {
		t.Fatalf("%d DELIVERY_FAILED after the receiver came back", n)
	}
}

// TestEnvelopeToIdleRedialingChannelGetsItsRetries: an idle channel whose
// receiver went away redials to stay ready. An envelope sent just before
// its last redial fails must be retried Retries times of its own before
// DELIVERY_FAILED, and not fail with that redial (`nova-node send` to a
// node stopped 40 s earlier failed in 0.4 s, "gave up after 3 retries",
// none of them for its envelope).
func TestEnvelopeToIdleRedialingChannelGetsItsRetries(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.RetryDelay = 200 * time.Millisecond // the idle channel's last redial waits 800 ms
	}))
	postN(t, net.Nodes[0], 0, 1)
	waitTakenAndAcked(t, net, rec, 1)
	sub := net.Nodes[0].Observer().Subscribe(1000)
	defer sub.Close()
	logEventsOnFailure(t, net.Nodes[0])
	gone := net.Nodes[1].ID()
	net.Kill(1)
	waitChannelEvent(t, sub, "redial 3 in", 10*time.Second)
	ids := postN(t, net.Nodes[0], 1, 2)
	own := 0 // redials scheduled since the envelope was posted, in event order
	deadline := time.After(15 * time.Second)
	for failed := false; !failed; {
		select {
		case e := <-sub.C:
			switch {
			case e.Type == protocol.EvtChannelChanged && e.Detail == "redial now: an envelope to send":
				own = 0 // its own schedule starts: the redials before were for nothing
			case e.Type == protocol.EvtChannelChanged && redialRe.MatchString(e.Detail):
				own++
			case e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed:
				if e.EnvelopeID != ids[0] {
					t.Fatalf("DELIVERY_FAILED for %s, want the posted %s", e.EnvelopeID, ids[0])
				}
				failed = true
			}
		case <-deadline:
			t.Fatal("no DELIVERY_FAILED within 15 s")
		}
	}
	if want := net.Nodes[0].Config().Retries; own != want {
		t.Fatalf("the envelope failed after %d redials of its own, want %d", own, want)
	}
	checkRedials(t, net.Nodes[0], gone)
}

// TestRedialWhenPeerSeenAgain: a receiver that comes back and connects to
// the sender gets its pending envelopes at once, not when the sender's
// next redial is due (here 30 s away).
func TestRedialWhenPeerSeenAgain(t *testing.T) {
	const retry = 30 * time.Second
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithConfig(func(i int, c *node.Config) { c.RetryDelay = retry }))
	postN(t, net.Nodes[0], 0, 5)
	// Acknowledged too: the channel must be idle when the receiver goes
	// (its envelopes then start a schedule of their own).
	waitTakenAndAcked(t, net, rec, 5)
	sub := net.Nodes[0].Observer().Subscribe(1000)
	defer sub.Close()
	cfg := net.ConfigOf(1)
	net.Kill(1)
	waitChannelEvent(t, sub, "redial 1 in", 5*time.Second)
	// Envelopes sent to the idle channel start their own schedule with a
	// dial now, which fails: the receiver is still down.
	postN(t, net.Nodes[0], 5, 10)
	waitChannelEvent(t, sub, "redial now: an envelope to send", 5*time.Second)
	waitChannelEvent(t, sub, "redial 1 in", 10*time.Second)
	start := time.Now()
	net.Start(1, cfg, rec.register(t))
	net.Connect(1, 0) // the receiver, back, reaches out
	waitChannelEvent(t, sub, "redial now: peer seen again", 10*time.Second)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if rec.len() < 10 {
			return fmt.Errorf("%d of 10 received", rec.len())
		}
		return nil
	})
	if d := time.Since(start); d >= retry {
		t.Fatalf("delivered after %s: waited for the scheduled redial", d)
	}
	rec.exactlyOnceInOrder(t, 10)
}

// TestRestartedSenderFindsPeerItKnew: the sender restarts with envelopes in
// its outbox for a peer that is neither configured nor connected. It dials
// the peer at the address it remembered from the last run (the address
// book) and delivers them, instead of failing them for want of an address.
func TestRestartedSenderFindsPeerItKnew(t *testing.T) {
	rec := &recorder{}
	net := sinkPair(t, rec, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.RetryDelay = 30 * time.Second // the channel stays reconnecting while the receiver is down
	}))
	addrsOf := func(i int) node.Config {
		cfg := net.Nodes[i].Config()
		cfg.Listen = nil
		for _, a := range net.Nodes[i].Host().Addrs() {
			cfg.Listen = append(cfg.Listen, a.String())
		}
		return cfg
	}
	cfg0, cfg1 := net.Nodes[0].Config(), addrsOf(1)
	net.Kill(1)
	postN(t, net.Nodes[0], 0, 10)
	net.Kill(0) // the outbox keeps the 10; the address book, node 1's address
	net.Start(1, cfg1, rec.register(t))
	sender := net.Start(0, cfg0, nil)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if n := deliveryFailures(sender); n > 0 {
			return fmt.Errorf("%d DELIVERY_FAILED: the restarted sender had no address", n)
		}
		if rec.len() < 10 {
			return fmt.Errorf("%d of 10 received", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 10)
}
