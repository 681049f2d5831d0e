package negotiation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/tiers"
)

// start creates, starts and registers (as node's only handler) a
// Negotiator; t.Cleanup closes it.
func start(t testing.TB, net *fakeNet, node int, store negotiation.KV, now func() time.Time, ev *events) *negotiation.Negotiator {
	t.Helper()
	cfg := negotiation.Config{Post: net.post(node), Store: store, Now: now}
	if now != nil {
		cfg.Factory = counter(fmt.Sprintf("n%d", node), now)
	}
	if ev != nil {
		cfg.Emit = ev.emit
	}
	n, err := negotiation.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	net.setHandlers(node, n.Handle)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func proposal(desc string, deadline time.Time, caps ...string) negotiation.Proposal {
	if caps == nil {
		caps = []string{}
	}
	return negotiation.Proposal{
		TaskDescription: desc, RequiredCapabilities: caps,
		EstimatedComplexity: negotiation.ComplexityMedium, DeadlineMs: deadline.UnixMilli(),
	}
}

// outcomes records the outcome callbacks of a Negotiator.
type outcomes struct {
	mu   sync.Mutex
	recs []negotiation.Record
}

func (o *outcomes) add(r negotiation.Record) {
	o.mu.Lock()
	o.recs = append(o.recs, r)
	o.mu.Unlock()
}

func (o *outcomes) all() []negotiation.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]negotiation.Record(nil), o.recs...)
}

func TestAcceptFlow(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2, "code.review")
	venus := net.addAgent("venus", 2, tiers.L2, "code.review")
	a := start(t, net, 1, nil, clk.Now, nil)
	b := start(t, net, 2, nil, clk.Now, nil)
	var out outcomes
	a.OnOutcome(out.add)
	var got []negotiation.Record
	b.OnProposalReceived(func(_ context.Context, r negotiation.Record) *negotiation.Decision {
		got = append(got, r)
		return nil // decide later
	})

	rec, err := a.Propose(t.Context(), mars, venus, proposal("review the parser", clk.Now().Add(time.Minute), "code.review"), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != negotiation.StatusPending || rec.Thread != rec.ProposalID || rec.Direction != negotiation.Sent {
		t.Fatalf("sent record %+v", rec)
	}
	if len(got) != 1 || got[0].ProposalID != rec.ProposalID || got[0].Direction != negotiation.Received {
		t.Fatalf("received %+v", got)
	}
	if p := b.ListPending(); len(p) != 1 || p[0].Target != venus || p[0].Proposer != mars {
		t.Fatalf("pending on b: %+v", p)
	}
	if err := b.Accept(t.Context(), rec.ProposalID, 90_000); err != nil {
		t.Fatal(err)
	}
	r, _ := a.Get(rec.ProposalID)
	if r.Status != negotiation.StatusAccepted || r.AcceptedBy != venus || r.EstimatedCompletionMs != 90_000 {
		t.Fatalf("after accept: %+v", r)
	}
	if o := out.all(); len(o) != 1 || o[0].Status != negotiation.StatusAccepted {
		t.Fatalf("outcomes %+v", o)
	}
	if len(a.ListPending()) != 0 || len(b.ListPending()) != 0 {
		t.Fatal("still pending after accept")
	}
	err = b.Accept(t.Context(), rec.ProposalID, 1)
	if !errors.Is(err, negotiation.ErrWrongState) || negotiation.CodeOf(err) != negotiation.CodeWrongState {
		t.Fatalf("second accept: %v", err)
	}
	if err := b.Accept(t.Context(), "nope", 1); !errors.Is(err, negotiation.ErrProposalNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestRejectionWithAlternative(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	earth := net.addAgent("earth", 1, tiers.L1)
	jupiter := net.addAgent("jupiter", 2, tiers.L1)
	mercury := net.addAgent("mercury", 2, tiers.L1, "plan.decompose")
	a := start(t, net, 1, nil, clk.Now, nil)
	b := start(t, net, 2, nil, clk.Now, nil)
	b.OnProposalReceived(func(_ context.Context, r negotiation.Record) *negotiation.Decision {
		return negotiation.RejectWith(negotiation.ReasonCapabilityMissing, mercury)
	})
	rec, err := a.Propose(t.Context(), earth, jupiter, proposal("plan the release", clk.Now().Add(time.Minute), "plan.decompose"), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != negotiation.StatusRejected || rec.RejectionReason != negotiation.ReasonCapabilityMissing ||
		rec.AlternativeSuggestion != mercury || rec.AnsweredBy != jupiter {
		t.Fatalf("record %+v", rec)
	}
	th := net.thread(rec.Thread)
	if len(th) != 2 || th[1].Type != envelope.TypeTaskReject {
		t.Fatalf("thread %v", th)
	}
	rej, err := negotiation.DecodeReject(th[1].Payload)
	if err != nil || rej.Reason != "CAPABILITY_MISSING" || rej.AlternativeSuggestion != mercury {
		t.Fatalf("reject payload %s: %v", th[1].Payload, err)
	}
	if r, _ := b.Lookup(rec.ProposalID, negotiation.Received); r.Status != negotiation.StatusRejected {
		t.Fatalf("receiver record %+v", r)
	}
	// An invalid reason code is refused before anything is sent.
	rec2, err := a.Propose(t.Context(), earth, jupiter, proposal("again", clk.Now().Add(time.Minute)), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = rec2
	if err := b.Reject(t.Context(), rec2.ProposalID, "not a code", ""); err == nil {
		t.Fatal("lower-case reason accepted")
	}
}

func TestEscalationRequired(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	sun := net.addAgent("sun", 2, tiers.L0)
	a := start(t, net, 1, nil, clk.Now, nil)
	start(t, net, 2, nil, clk.Now, nil)
	_, err := a.Propose(t.Context(), mars, sun, proposal("take over", clk.Now().Add(time.Minute)), negotiation.ProposeOptions{})
	if !errors.Is(err, tiers.ErrEscalationRequired) || negotiation.CodeOf(err) != tiers.CodeEscalationRequired {
		t.Fatalf("got %v, want ESCALATION_REQUIRED", err)
	}
	if len(a.List()) != 0 {
		t.Fatalf("a failed proposal was kept: %+v", a.List())
	}
	rec, err := a.Propose(t.Context(), mars, sun, proposal("take over", clk.Now().Add(time.Minute)),
		negotiation.ProposeOptions{Justification: "the build is blocked on a design decision"})
	if err != nil {
		t.Fatal(err)
	}
	th := net.thread(rec.Thread)
	if len(th) != 1 || th[0].Metadata.EscalationJustification != "the build is blocked on a design decision" {
		t.Fatalf("thread %+v", th)
	}
}

// TestProposalTimeout runs in a synctest bubble: the deadline timer fires
// in fake time, at once.
func TestProposalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newFakeNet()
		mars := net.addAgent("mars", 1, tiers.L2)
		venus := net.addAgent("venus", 2, tiers.L2)
		var evA, evB events
		a := start(t, net, 1, nil, nil, &evA)
		b := start(t, net, 2, nil, nil, &evB)
		var out outcomes
		a.OnOutcome(out.add)
		rec, err := a.Propose(t.Context(), mars, venus, proposal("slow", time.Now().Add(5*time.Second)), negotiation.ProposeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if r, _ := a.Get(rec.ProposalID); r.Status != negotiation.StatusPending {
			t.Fatalf("timed out early: %+v", r)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		r, _ := a.Get(rec.ProposalID)
		if r.Status != negotiation.StatusTimedOut {
			t.Fatalf("after the deadline: %+v", r)
		}
		if o := out.all(); len(o) != 1 || o[0].Status != negotiation.StatusTimedOut {
			t.Fatalf("outcomes %+v", o)
		}
		to := evA.of(negotiation.EvtProposalTimedOut)
		if len(to) != 1 || to[0].Code != negotiation.CodeProposalTimeout {
			t.Fatalf("timeout events %+v", to)
		}
		// The receiver can no longer accept.
		err = b.Accept(t.Context(), rec.ProposalID, 1000)
		if !errors.Is(err, negotiation.ErrProposalTimeout) || !strings.Contains(err.Error(), "new proposal") {
			t.Fatalf("late accept: %v", err)
		}
		if len(b.ListPending()) != 0 {
			t.Fatal("expired proposal still pending on the receiver")
		}
	})
}

func TestLateAnswerIgnored(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	venus := net.addAgent("venus", 2, tiers.L2)
	var ev events
	a := start(t, net, 1, nil, clk.Now, &ev)
	start(t, net, 2, nil, clk.Now, nil)
	var out outcomes
	a.OnOutcome(out.add)
	rec, err := a.Propose(t.Context(), mars, venus, proposal("x", clk.Now().Add(time.Second)), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	// The answer arrives after the deadline, before the timer noticed.
	late, _ := envelope.NewFactory().New(venus, mars, envelope.TypeTaskAccept,
		negotiation.Accept{AcceptedBy: venus, EstimatedCompletionMs: 10})
	late.CorrelationID = rec.Thread
	handled, err := a.Handle(t.Context(), late)
	if !handled || err != nil {
		t.Fatalf("Handle = %v, %v", handled, err)
	}
	r, _ := a.Get(rec.ProposalID)
	if r.Status != negotiation.StatusTimedOut {
		t.Fatalf("late accept changed the record: %+v", r)
	}
	ign := ev.of(negotiation.EvtAnswerIgnored)
	if len(ign) != 1 || ign[0].Code != negotiation.CodeProposalTimeout {
		t.Fatalf("ignored events %+v\n%s", ign, &ev)
	}
	if o := out.all(); len(o) != 1 || o[0].Status != negotiation.StatusTimedOut {
		t.Fatalf("outcomes %+v", o)
	}
	// Once more, after the timeout was recorded.
	if _, err := a.Handle(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	if n := len(ev.of(negotiation.EvtAnswerIgnored)); n != 2 {
		t.Fatalf("%d ignored events", n)
	}
}

func TestAnswerAttribution(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	venus := net.addAgent("venus", 2, tiers.L2, "design.ui")
	pluto := net.addAgent("pluto", 2, tiers.L2, "design.ui")
	a := start(t, net, 1, nil, clk.Now, nil)
	start(t, net, 2, nil, clk.Now, nil)
	rec, err := a.Propose(t.Context(), mars, venus, proposal("x", clk.Now().Add(time.Minute)), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := envelope.NewFactory().New(pluto, mars, envelope.TypeTaskAccept, negotiation.Accept{AcceptedBy: pluto, EstimatedCompletionMs: 1})
	forged.CorrelationID = rec.Thread
	handled, err := a.Handle(t.Context(), forged)
	if !handled || !errors.Is(err, negotiation.ErrNotAttributed) {
		t.Fatalf("forged accept: %v %v", handled, err)
	}
	if r, _ := a.Get(rec.ProposalID); r.Status != negotiation.StatusPending {
		t.Fatalf("forged accept changed the record: %+v", r)
	}
	// acceptedBy must be the sender.
	lie, _ := envelope.NewFactory().New(venus, mars, envelope.TypeTaskAccept, negotiation.Accept{AcceptedBy: pluto, EstimatedCompletionMs: 1})
	lie.CorrelationID = rec.Thread
	if _, err := a.Handle(t.Context(), lie); !errors.Is(err, negotiation.ErrInvalidProposal) {
		t.Fatalf("acceptedBy mismatch: %v", err)
	}

	// Capability routing: any agent may answer, once.
	crec, err := a.Propose(t.Context(), mars, "design.ui", proposal("draw it", clk.Now().Add(time.Minute)), negotiation.ProposeOptions{ByCapability: true})
	if err != nil {
		t.Fatal(err)
	}
	th := net.thread(crec.Thread)
	if len(th) != 1 || th[0].Recipient != pluto {
		t.Fatalf("capability proposal went to %v", th)
	}
	acc, _ := envelope.NewFactory().New(pluto, mars, envelope.TypeTaskAccept, negotiation.Accept{AcceptedBy: pluto, EstimatedCompletionMs: 5})
	acc.CorrelationID = crec.Thread
	if _, err := a.Handle(t.Context(), acc); err != nil {
		t.Fatal(err)
	}
	acc2, _ := envelope.NewFactory().New(venus, mars, envelope.TypeTaskAccept, negotiation.Accept{AcceptedBy: venus, EstimatedCompletionMs: 5})
	acc2.CorrelationID = crec.Thread
	if _, err := a.Handle(t.Context(), acc2); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Get(crec.ProposalID); r.Status != negotiation.StatusAccepted || r.AcceptedBy != pluto {
		t.Fatalf("capability proposal: %+v", r)
	}
}

func TestInvalidProposalIsRejected(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	venus := net.addAgent("venus", 2, tiers.L2)
	var answers []*envelope.Envelope
	net.setHandlers(1, func(_ context.Context, e *envelope.Envelope) (bool, error) {
		answers = append(answers, e)
		return true, nil
	})
	var ev events
	b := start(t, net, 2, nil, clk.Now, &ev)
	bad, _ := envelope.NewFactory().New(mars, venus, envelope.TypeTaskProposal, map[string]any{"taskDescription": "x"})
	if err := net.post(1)(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 1 || answers[0].Type != envelope.TypeTaskReject || answers[0].CorrelationID != bad.ID {
		t.Fatalf("answers %v", answers)
	}
	if r, _ := negotiation.DecodeReject(answers[0].Payload); r.Reason != negotiation.ReasonInvalidProposal {
		t.Fatalf("reason %+v", r)
	}
	if len(b.List()) != 0 || len(ev.of(negotiation.EvtProposalInvalid)) != 1 {
		t.Fatalf("records %+v events %s", b.List(), &ev)
	}
}

func TestRestartPersistence(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	venus := net.addAgent("venus", 2, tiers.L2)
	storeA, storeB := negotiation.NewMemKV(), negotiation.NewMemKV()
	a := start(t, net, 1, storeA, clk.Now, nil)
	b := start(t, net, 2, storeB, clk.Now, nil)
	r1, err := a.Propose(t.Context(), mars, venus, proposal("first", clk.Now().Add(time.Minute)), negotiation.ProposeOptions{Tag: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Propose(t.Context(), mars, venus, proposal("second", clk.Now().Add(10*time.Minute)), negotiation.ProposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	_ = b.Close()
	if storeA.Len(negotiation.Bucket) != 2 || storeB.Len(negotiation.Bucket) != 2 {
		t.Fatalf("stored %d and %d records", storeA.Len(negotiation.Bucket), storeB.Len(negotiation.Bucket))
	}

	// Both nodes restart after the first deadline has passed.
	clk.Advance(2 * time.Minute)
	a2, err := negotiation.New(negotiation.Config{Post: net.post(1), Store: storeA, Now: clk.Now, Factory: counter("a2", clk.Now)})
	if err != nil {
		t.Fatal(err)
	}
	var out outcomes
	a2.OnOutcome(out.add)
	net.setHandlers(1, a2.Handle)
	if err := a2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a2.Close() })
	b2 := start(t, net, 2, storeB, clk.Now, nil)

	if r, _ := a2.Get(r1.ProposalID); r.Status != negotiation.StatusTimedOut || r.Tag != "t1" {
		t.Fatalf("past-deadline proposal after restart: %+v", r)
	}
	if o := out.all(); len(o) != 1 || o[0].ProposalID != r1.ProposalID {
		t.Fatalf("outcomes at Start: %+v", o)
	}
	if p := b2.ListPending(); len(p) != 1 || p[0].ProposalID != r2.ProposalID {
		t.Fatalf("b2 pending %+v", p)
	}
	if err := b2.Accept(t.Context(), r2.ProposalID, 1234); err != nil {
		t.Fatal(err)
	}
	if r, _ := a2.Get(r2.ProposalID); r.Status != negotiation.StatusAccepted || r.EstimatedCompletionMs != 1234 {
		t.Fatalf("accepted across restart: %+v", r)
	}
	// The change was persisted too.
	var stored negotiation.Record
	_ = storeA.ForEach(negotiation.Bucket, func(k string, v []byte) error {
		if strings.HasSuffix(k, r2.ProposalID) {
			return json.Unmarshal(v, &stored)
		}
		return nil
	})
	if stored.Status != negotiation.StatusAccepted {
		t.Fatalf("stored %+v", stored)
	}
}

func TestUnreadableRecordSkipped(t *testing.T) {
	store := negotiation.NewMemKV()
	_ = store.Put(negotiation.Bucket, "sent/x", []byte("{not json"))
	var ev events
	n, _ := negotiation.New(negotiation.Config{Post: func(context.Context, *envelope.Envelope) error { return nil }, Store: store, Emit: ev.emit})
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if len(n.List()) != 0 || len(ev.of(negotiation.EvtStoreFailed)) != 1 {
		t.Fatalf("list %+v events %s", n.List(), &ev)
	}
}

func TestLifecycle(t *testing.T) {
	n, err := negotiation.New(negotiation.Config{})
	if err == nil || n != nil {
		t.Fatal("New without Post succeeded")
	}
	post := func(context.Context, *envelope.Envelope) error { return nil }
	n, _ = negotiation.New(negotiation.Config{Post: post})
	if err := n.Close(); err != nil { // before Start
		t.Fatal(err)
	}
	if _, err := n.Propose(t.Context(), "a", "b", proposal("x", time.Now().Add(time.Minute)), negotiation.ProposeOptions{}); !errors.Is(err, negotiation.ErrClosed) {
		t.Fatalf("Propose after Close: %v", err)
	}
	if err := n.Start(t.Context()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
	for range 3 {
		n, _ := negotiation.New(negotiation.Config{Post: post})
		if err := n.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Propose(t.Context(), "a", "b", proposal("x", time.Now().Add(time.Hour)), negotiation.ProposeOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = n.Close()
		_ = n.Close()
	}
	if s := leakcheck.Wait("protocol/task/negotiation.", 2*time.Second); s != "" {
		t.Fatalf("leaked goroutines:\n%s", s)
	}
}

func TestProposeValidation(t *testing.T) {
	clk := newClock()
	net := newFakeNet()
	mars := net.addAgent("mars", 1, tiers.L2)
	a := start(t, net, 1, nil, clk.Now, nil)
	cases := []struct {
		name  string
		to    string
		p     negotiation.Proposal
		opts  negotiation.ProposeOptions
		field string
	}{
		{"past deadline", "venus", proposal("x", clk.Now().Add(-time.Second)), negotiation.ProposeOptions{}, "deadlineMs"},
		{"blank description", "venus", proposal("  ", clk.Now().Add(time.Second)), negotiation.ProposeOptions{}, "taskDescription"},
		{"bad capability", "venus", proposal("x", clk.Now().Add(time.Second), "no spaces"), negotiation.ProposeOptions{}, "requiredCapabilities[0]"},
		{"bad capability target", "not a cap", proposal("x", clk.Now().Add(time.Second)), negotiation.ProposeOptions{ByCapability: true}, "to"},
		{"other proposer", "venus", func() negotiation.Proposal {
			p := proposal("x", clk.Now().Add(time.Second))
			p.ProposerAgentID = "pluto"
			return p
		}(), negotiation.ProposeOptions{}, "proposerAgentId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := a.Propose(t.Context(), mars, c.to, c.p, c.opts)
			var ie *negotiation.InvalidError
			if !errors.As(err, &ie) || ie.Field != c.field || ie.Code() != negotiation.CodeInvalidProposal {
				t.Fatalf("got %v, want an invalid %s", err, c.field)
			}
		})
	}
}

func TestSameAgent(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"mars", "mars", true}, {"mars", "mars@p1", true}, {"mars@p1", "mars", true},
		{"mars@p1", "mars@p2", false}, {"mars", "venus@p1", false}, {"", "", false}, {"mars@p1", "mars@p1", true},
	} {
		if got := negotiation.SameAgent(c.a, c.b); got != c.want {
			t.Errorf("SameAgent(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
