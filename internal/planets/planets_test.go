package planets_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/planets"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

func TestAgentsMatchTheSeed(t *testing.T) {
	as := planets.Agents()
	if len(as) != 21 || len(tiers.DefaultAssignments) != 21 {
		t.Fatalf("%d agents", len(as))
	}
	if as[0].ID != "sun" || as[0].Tier != tiers.L0 {
		t.Fatalf("first agent %+v", as[0])
	}
	known := map[string]bool{}
	for _, c := range planets.Capabilities() {
		if err := agentcard.CheckCapabilityID(c.ID); err != nil || c.Description == "" || known[c.ID] {
			t.Errorf("capability %+v: %v", c, err)
		}
		known[c.ID] = true
	}
	holders := map[string][]string{}
	seen := map[string]bool{}
	for _, a := range as {
		if seen[a.ID] {
			t.Errorf("duplicate %s", a.ID)
		}
		seen[a.ID] = true
		if want, ok := tiers.DefaultTier(a.ID); !ok || want != a.Tier {
			t.Errorf("%s is %s, the seed says %s", a.ID, a.Tier, want)
		}
		if n := len(a.Capabilities); n < 1 || n > 3 {
			t.Errorf("%s has %d capabilities", a.ID, n)
		}
		for _, c := range a.Capabilities {
			if !known[c] {
				t.Errorf("%s declares unknown capability %s", a.ID, c)
			}
			holders[c] = append(holders[c], a.ID)
		}
		card := a.Card()
		card.Host = ""
		if err := card.Validate(); err != nil {
			t.Errorf("%s: invalid card: %v", a.ID, err)
		}
		for _, c := range a.Capabilities {
			if !card.HasCapability(c) {
				t.Errorf("%s card lacks %s", a.ID, c)
			}
		}
	}
	// Every capability is shared, so that a failed sub-task can move.
	for c := range known {
		if len(holders[c]) < 2 {
			t.Errorf("capability %s is declared by %v only: reassignment impossible", c, holders[c])
		}
	}
	// Agents returns copies.
	as[0].Capabilities[0] = "x"
	if planets.Agents()[0].Capabilities[0] == "x" {
		t.Fatal("Agents shares its slices")
	}
}

func TestWorkIsDeterministic(t *testing.T) {
	task := taskswarm.Task{SwarmID: "s1", SubTaskID: "st-1", Attempt: 1, Description: "ship the parser (part: code.review)",
		RequiredCapabilities: []string{"code.review"}}
	a, err := planets.Work(t.Context(), "mars@12D3KooW", task)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := planets.Work(t.Context(), "mars", task)
	if string(a) != string(b) {
		t.Fatalf("not deterministic: %s vs %s", a, b)
	}
	var r planets.Result
	if err := json.Unmarshal(a, &r); err != nil {
		t.Fatal(err)
	}
	if r.Agent != "mars" || r.Capability != "code.review" || r.Summary != "Mars (L2, operational) reviewed: ship the parser (part: code.review)" {
		t.Fatalf("result %+v", r)
	}
	long := taskswarm.Task{SwarmID: "s", SubTaskID: "t", Attempt: 1, Description: strings.Repeat("é", 200)}
	out, _ := planets.Work(t.Context(), "io", long)
	if len(out) > 400 || !json.Valid(out) {
		t.Fatalf("long description: %d bytes %s", len(out), out)
	}
	if _, err := planets.Work(t.Context(), "pegasus", task); !errors.Is(err, planets.ErrUnknownAgent) {
		t.Fatalf("unknown agent: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := planets.Work(ctx, "mars", task); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestFailingOnce(t *testing.T) {
	w := planets.FailingOnce("mars")
	task := taskswarm.Task{SwarmID: "s", SubTaskID: "st-1", Attempt: 1, Description: "x"}
	_, err := w(t.Context(), "mars@p", task)
	if !errors.Is(err, planets.ErrSimulatedFailure) || negotiation.CodeOf(err) != "SIMULATED_FAILURE" {
		t.Fatalf("first attempt: %v", err)
	}
	if _, err := w(t.Context(), "venus@p", task); err != nil {
		t.Fatal(err)
	}
	task.Attempt = 2
	if _, err := w(t.Context(), "mars@p", task); err != nil {
		t.Fatal(err)
	}
}

func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		payload any
		want    string
	}{
		{"status?", "status?"},
		{map[string]string{"text": "hello"}, "hello"},
		{map[string]int{"n": 1}, `{"n":1}`},
		{nil, "null"},
	} {
		env, err := envelope.NewFactory().New("sun@p1", "venus@p2", envelope.TypeRequest, c.payload)
		if err != nil {
			t.Fatal(err)
		}
		got, err := planets.Answer(t.Context(), env)
		if err != nil {
			t.Fatal(err)
		}
		r := got.(planets.Reply)
		want := "Venus (L2, operational; design.ui, code.write) received from sun: " + c.want
		if r.Agent != "venus" || r.Reply != want {
			t.Errorf("reply %q, want %q", r.Reply, want)
		}
	}
	env, _ := envelope.NewFactory().New("sun", "nobody", envelope.TypeRequest, nil)
	if _, err := planets.Answer(t.Context(), env); !errors.Is(err, planets.ErrUnknownAgent) || negotiation.CodeOf(err) != "AGENT_NOT_FOUND" {
		t.Fatalf("unknown: %v", err)
	}
}

func TestDecide(t *testing.T) {
	rec := func(target string, complexity negotiation.Complexity, caps ...string) negotiation.Record {
		return negotiation.Record{Target: target, Proposer: "sun@p", Proposal: negotiation.Proposal{
			RequiredCapabilities: caps, EstimatedComplexity: complexity}}
	}
	d := planets.Decide(t.Context(), rec("mars@p", negotiation.ComplexitySimple, "code.review", "design.ui"))
	if d == nil || !d.Accept || d.EstimatedCompletionMs != planets.EstimateSimpleMs {
		t.Fatalf("capable mars: %+v", d)
	}
	d = planets.Decide(t.Context(), rec("earth@p", negotiation.ComplexityComplex))
	if d == nil || !d.Accept || d.EstimatedCompletionMs != planets.EstimateComplexMs {
		t.Fatalf("no capability required: %+v", d)
	}
	d = planets.Decide(t.Context(), rec("earth@p", negotiation.ComplexityMedium, "test.write", "debug.trace"))
	if d == nil || d.Accept || d.Reason != negotiation.ReasonCapabilityMissing || d.Alternative != "saturn" {
		t.Fatalf("incapable earth: %+v", d)
	}
	if err := (negotiation.Reject{Reason: d.Reason, AlternativeSuggestion: d.Alternative}).Validate(); err != nil {
		t.Fatal(err)
	}
	if planets.Decide(t.Context(), rec("pegasus", negotiation.ComplexityMedium)) != nil {
		t.Fatal("non-planetary agent decided")
	}
	if got := planets.Suggest([]string{"code.review"}, "mars"); got != "pluto" {
		t.Fatalf("suggest %q", got)
	}
	if got := planets.Suggest([]string{"nothing.here"}); got != "" {
		t.Fatalf("suggest %q", got)
	}
}
