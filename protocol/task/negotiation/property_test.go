package negotiation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/tiers"
)

var planetNames = []string{"sun", "mercury", "earth", "jupiter", "venus", "mars", "pluto", "io", "atlas"}

func genCaps() *rapid.Generator[[]string] {
	return rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z]{1,8}\.[a-z]{1,8}`), 0, 6, rapid.ID[string])
}

func genProposal(now time.Time) *rapid.Generator[negotiation.Proposal] {
	return rapid.Custom(func(t *rapid.T) negotiation.Proposal {
		return negotiation.Proposal{
			TaskDescription:      rapid.StringMatching(`[A-Za-z][A-Za-z0-9 ,.\n-]{0,120}`).Draw(t, "desc"),
			RequiredCapabilities: genCaps().Draw(t, "caps"),
			EstimatedComplexity: rapid.SampledFrom([]negotiation.Complexity{
				negotiation.ComplexitySimple, negotiation.ComplexityMedium, negotiation.ComplexityComplex,
			}).Draw(t, "complexity"),
			DeadlineMs: now.UnixMilli() + rapid.Int64Range(1, 1e9).Draw(t, "deadlineIn"),
		}
	})
}

// twoAgents draws a proposer and a target on one or two nodes, with random
// tiers, and starts the negotiators.
func twoAgents(t *rapid.T, clk *clock) (net *fakeNet, from, to string, a, b *negotiation.Negotiator, cleanup func()) {
	net = newFakeNet()
	names := rapid.Permutation(planetNames).Draw(t, "names")
	tierGen := rapid.SampledFrom([]tiers.Tier{tiers.L0, tiers.L1, tiers.L2, tiers.L3})
	sameNode := rapid.Bool().Draw(t, "sameNode")
	nodeB := 2
	if sameNode {
		nodeB = 1
	}
	from = net.addAgent(names[0], 1, tierGen.Draw(t, "fromTier"))
	to = net.addAgent(names[1], nodeB, tierGen.Draw(t, "toTier"))
	mk := func(node int) *negotiation.Negotiator {
		n, err := negotiation.New(negotiation.Config{Post: net.post(node), Now: clk.Now, Factory: counter("n"+names[node], clk.Now)})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		net.setHandlers(node, n.Handle)
		return n
	}
	a = mk(1)
	b = a
	if !sameNode {
		b = mk(2)
	}
	return net, from, to, a, b, func() { _ = a.Close(); _ = b.Close() }
}

// expectRouted checks the outcome of Propose against the tier rules:
// forbidden pairs fail with TIER_VIOLATION, unjustified escalations with
// ESCALATION_REQUIRED, and nothing is kept.
func expectRouted(t *rapid.T, net *fakeNet, a *negotiation.Negotiator, from, to string, justified bool, err error) bool {
	fa, _ := net.resolveLocked(from)
	ta, _ := net.resolveLocked(to)
	want := tiers.DefaultRules().Check(tiers.Message{Source: fa.tier, Target: ta.tier, Type: string(envelope.TypeTaskProposal),
		Justification: map[bool]string{true: "needed"}[justified]})
	if want != nil {
		if negotiation.CodeOf(err) != negotiation.CodeOf(want) {
			t.Fatalf("%s -> %s: got %v, want %v", fa.tier, ta.tier, err, want)
		}
		if len(a.List()) != 0 {
			t.Fatalf("a refused proposal was kept")
		}
		return false
	}
	if err != nil {
		t.Fatalf("%s -> %s: %v", fa.tier, ta.tier, err)
	}
	return true
}

// TestProperty23_ProposalStructure: for any proposal, the proposal envelope
// carries the task description, required capabilities, complexity and
// deadline; an accept carries the accepting agent and an estimated
// completion time; a reject carries a reason code. Any one broken field is
// reported by name.
func TestProperty23_ProposalStructure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newClock()
		net, from, to, a, b, cleanup := twoAgents(t, clk)
		defer cleanup()
		p := genProposal(clk.Now()).Draw(t, "proposal")
		accept := rapid.Bool().Draw(t, "accept")
		est := rapid.Int64Range(1, 1e9).Draw(t, "estimate")
		reason := rapid.StringMatching(`[A-Z][A-Z0-9_]{0,20}`).Draw(t, "reason")
		alt := rapid.SampledFrom([]string{"", "atlas", "io@node9"}).Draw(t, "alternative")
		b.OnProposalReceived(func(_ context.Context, r negotiation.Record) *negotiation.Decision {
			if !negotiation.SameAgent(r.Target, to) {
				return nil
			}
			if accept {
				return negotiation.AcceptWith(est)
			}
			return negotiation.RejectWith(reason, alt)
		})
		justified := rapid.Bool().Draw(t, "justified")
		opts := negotiation.ProposeOptions{}
		if justified {
			opts.Justification = "needed"
		}
		rec, err := a.Propose(context.Background(), from, to, p, opts)
		if !expectRouted(t, net, a, from, to, justified, err) {
			return
		}
		th := net.thread(rec.Thread)
		if len(th) != 2 {
			t.Fatalf("thread has %d envelopes", len(th))
		}
		// The proposal envelope has every field, as sent.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(th[0].Payload, &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"taskDescription", "requiredCapabilities", "estimatedComplexity", "deadlineMs", "proposerAgentId"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("proposal payload lacks %s: %s", k, th[0].Payload)
			}
		}
		got, err := negotiation.DecodeProposal(th[0].Payload)
		if err != nil {
			t.Fatal(err)
		}
		p.ProposerAgentID = from
		if got.TaskDescription != p.TaskDescription || !slices.Equal(got.RequiredCapabilities, p.RequiredCapabilities) ||
			got.EstimatedComplexity != p.EstimatedComplexity || got.DeadlineMs != p.DeadlineMs || got.ProposerAgentID != from {
			t.Fatalf("sent %+v, delivered %+v", p, got)
		}
		ans := th[1]
		if accept {
			acc, err := negotiation.DecodeAccept(ans.Payload)
			if ans.Type != envelope.TypeTaskAccept || err != nil || acc.AcceptedBy != to || acc.EstimatedCompletionMs != est {
				t.Fatalf("accept %s %s: %v", ans.Type, ans.Payload, err)
			}
		} else {
			rej, err := negotiation.DecodeReject(ans.Payload)
			if ans.Type != envelope.TypeTaskReject || err != nil || rej.Reason != reason || rej.AlternativeSuggestion != alt {
				t.Fatalf("reject %s %s: %v", ans.Type, ans.Payload, err)
			}
		}

		// Breaking one field is reported with that field's name.
		broken := p
		field := rapid.SampledFrom([]string{"taskDescription", "requiredCapabilities", "estimatedComplexity", "deadlineMs", "proposerAgentId"}).Draw(t, "broken")
		switch field {
		case "taskDescription":
			broken.TaskDescription = rapid.SampledFrom([]string{"", " \t", "bad\x00byte", strings.Repeat("x", negotiation.MaxDescriptionLen+1)}).Draw(t, "badDesc")
		case "requiredCapabilities":
			broken.RequiredCapabilities = append(slices.Clone(p.RequiredCapabilities), rapid.SampledFrom([]string{"", "has space", ".dot", strings.Repeat("c", 129)}).Draw(t, "badCap"))
			field = "requiredCapabilities["
		case "estimatedComplexity":
			broken.EstimatedComplexity = negotiation.Complexity(rapid.SampledFrom([]string{"", "hard", "Simple"}).Draw(t, "badComplexity"))
		case "deadlineMs":
			broken.DeadlineMs = rapid.Int64Range(-1e12, 0).Draw(t, "badDeadline")
		case "proposerAgentId":
			broken.ProposerAgentID = rapid.SampledFrom([]string{"", " mars", "a\nb"}).Draw(t, "badProposer")
		}
		var ie *negotiation.InvalidError
		if err := broken.Validate(); !errors.As(err, &ie) || !strings.HasPrefix(ie.Field, field) {
			t.Fatalf("broken %s: got %v", field, err)
		}
		b2, _ := json.Marshal(broken)
		if _, err := negotiation.DecodeProposal(b2); !errors.As(err, &ie) || !strings.HasPrefix(ie.Field, field) {
			t.Fatalf("decode broken %s: got %v", field, err)
		}
	})
}

// TestProperty24_AcceptanceThread: for any accepted proposal, the proposal,
// the acceptance and every later message of the task share one correlation
// thread, on both nodes.
func TestProperty24_AcceptanceThread(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newClock()
		net, from, to, a, b, cleanup := twoAgents(t, clk)
		defer cleanup()
		// Other traffic in other threads, to make sure threads do not mix.
		other := rapid.IntRange(0, 3).Draw(t, "otherProposals")
		b.OnProposalReceived(func(_ context.Context, r negotiation.Record) *negotiation.Decision {
			return negotiation.AcceptWith(1000)
		})
		justified := true
		rec, err := a.Propose(context.Background(), from, to, genProposal(clk.Now()).Draw(t, "proposal"),
			negotiation.ProposeOptions{Justification: "needed"})
		if !expectRouted(t, net, a, from, to, justified, err) {
			return
		}
		for range other {
			if _, err := a.Propose(context.Background(), from, to, genProposal(clk.Now()).Draw(t, "other"),
				negotiation.ProposeOptions{Justification: "needed"}); err != nil {
				t.Fatal(err)
			}
		}
		if rec.Status != negotiation.StatusAccepted {
			t.Fatalf("not accepted: %+v", rec)
		}
		recv, ok := b.Lookup(rec.ProposalID, negotiation.Received)
		if !ok || recv.Thread != rec.Thread || recv.Status != negotiation.StatusAccepted {
			t.Fatalf("receiver record %+v", recv)
		}
		// Later messages of the task: requests from the proposer, each
		// answered by the target.
		follow := rapid.IntRange(0, 5).Draw(t, "followUps")
		for i := range follow {
			req, err := a.NewInThread(rec.ProposalID, negotiation.Sent, envelope.TypeRequest, map[string]int{"step": i})
			if err != nil {
				t.Fatal(err)
			}
			if err := net.post(1)(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			resp, err := b.NewInThread(rec.ProposalID, negotiation.Received, envelope.TypeResponse, map[string]int{"done": i})
			if err != nil {
				t.Fatal(err)
			}
			fb, _ := net.resolveLocked(to)
			if err := net.post(fb.node)(context.Background(), resp); err != nil {
				t.Fatalf("answer in the thread refused: %v", err)
			}
		}
		th := net.thread(rec.Thread)
		if want := 2 + 2*follow; len(th) != want {
			t.Fatalf("thread has %d envelopes, want %d", len(th), want)
		}
		if th[0].ID != rec.Thread || th[0].CorrelationID != "" || th[0].Type != envelope.TypeTaskProposal {
			t.Fatalf("the proposal does not start the thread: %+v", th[0])
		}
		for _, e := range th[1:] {
			if e.CorrelationID != rec.Thread {
				t.Fatalf("%s %s has correlationId %q, want %q", e.Type, e.ID, e.CorrelationID, rec.Thread)
			}
		}
		if th[1].Type != envelope.TypeTaskAccept {
			t.Fatalf("second envelope is %s", th[1].Type)
		}
		// Every delivered envelope belongs to exactly one proposal's thread.
		for _, e := range net.delivered() {
			if e.ThreadID() != rec.Thread {
				if _, ok := a.Get(e.ThreadID()); !ok {
					t.Fatalf("envelope %s in unknown thread %s", e.ID, e.ThreadID())
				}
			}
		}
	})
}
