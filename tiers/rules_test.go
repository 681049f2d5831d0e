package tiers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/tiers"
)

var allTiers = []tiers.Tier{tiers.L0, tiers.L1, tiers.L2, tiers.L3}

// seedRoutes is requirement 4.5 read word by word: "L0 agents can communicate
// with all tiers, L1 agents can communicate with L0 and L1, L2 agents can
// communicate with L0-L2, and L3 agents can communicate with all tiers."
var seedRoutes = [4][4]bool{
	/* L0 -> */ {true, true, true, true},
	/* L1 -> */ {true, true, false, false},
	/* L2 -> */ {true, true, true, false},
	/* L3 -> */ {true, true, true, true},
}

func TestDefaultRules(t *testing.T) {
	// DEFAULT_TIER_RULES from seed 000, as JSON.
	const seedJSON = `[
	  {"sourceTier":0,"allowedTargetTiers":[0,1,2,3],"requiresEscalationJustification":false},
	  {"sourceTier":1,"allowedTargetTiers":[0,1],"requiresEscalationJustification":false},
	  {"sourceTier":2,"allowedTargetTiers":[0,1,2],"requiresEscalationJustification":true},
	  {"sourceTier":3,"allowedTargetTiers":[0,1,2,3],"requiresEscalationJustification":true}
	]`
	var seed tiers.Rules
	if err := json.Unmarshal([]byte(seedJSON), &seed); err != nil {
		t.Fatal(err)
	}
	got := tiers.DefaultRules()
	if !reflect.DeepEqual(got, seed) {
		t.Errorf("DefaultRules() = %+v, want %+v", got, seed)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if compact := strings.Join(strings.Fields(seedJSON), ""); string(b) != compact {
		t.Errorf("json.Marshal(DefaultRules()) = %s, want %s", b, compact)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("DefaultRules().Validate() = %v", err)
	}
	for _, src := range allTiers {
		for _, dst := range allTiers {
			if a := got.Allowed(src, dst); a != seedRoutes[src][dst] {
				t.Errorf("DefaultRules().Allowed(%v, %v) = %v, want %v", src, dst, a, !a)
			}
		}
	}

	// Each call returns a fresh copy.
	got[1].Allowed[0] = tiers.L3
	got[1].Allowed = append(got[1].Allowed, tiers.L2)
	got[0].RequiresEscalationJustification = true
	if again := tiers.DefaultRules(); !reflect.DeepEqual(again, seed) {
		t.Errorf("DefaultRules() after modifying an earlier result = %+v", again)
	}
}

func TestRulesValidate(t *testing.T) {
	rule := func(src tiers.Tier, allowed ...tiers.Tier) tiers.Rule {
		return tiers.Rule{Source: src, Allowed: allowed}
	}
	for _, tc := range []struct {
		name  string
		rules tiers.Rules
		want  []string // substrings of the error; none means valid
	}{
		{"default", tiers.DefaultRules(), nil},
		{"reordered", tiers.Rules{rule(3), rule(1, 1), rule(0, 0, 1, 2, 3), rule(2, 2)}, nil},
		{"empty allowed lists", tiers.Rules{rule(0), rule(1), rule(2), rule(3)}, nil},
		{"nil", nil, []string{"no rule for source tier L0", "no rule for source tier L3"}},
		{"missing L2", tiers.Rules{rule(0), rule(1), rule(3)}, []string{"no rule for source tier L2"}},
		{"duplicate", tiers.Rules{rule(0), rule(1), rule(2), rule(3), rule(1, 0)},
			[]string{"rule 4: duplicate rule for source tier L1 (first is rule 1)"}},
		{"invalid source", tiers.Rules{rule(0), rule(1), rule(2), rule(3), rule(4)},
			[]string{"rule 4: invalid source tier L?(4)"}},
		{"invalid target", tiers.Rules{rule(0), rule(1, 0, 9), rule(2), rule(3)},
			[]string{"rule 1 (source L1): invalid allowed target tier L?(9)"}},
		{"several", tiers.Rules{rule(0, 5), rule(0), rule(7)},
			[]string{"invalid allowed target tier L?(5)", "duplicate rule for source tier L0",
				"invalid source tier L?(7)", "no rule for source tier L1", "no rule for source tier L2",
				"no rule for source tier L3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rules.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, want it to mention %q", msg, w)
				}
			}
			for line := range strings.SplitSeq(msg, "\n") {
				if !strings.HasPrefix(line, "tiers: ") {
					t.Errorf("error line %q lacks the package prefix", line)
				}
			}
		})
	}
}

func TestRulesAllowedEdges(t *testing.T) {
	rules := tiers.DefaultRules()
	for _, tc := range []struct{ src, dst tiers.Tier }{{4, 0}, {0, 4}, {255, 255}} {
		if rules.Allowed(tc.src, tc.dst) {
			t.Errorf("Allowed(%v, %v) = true for an invalid tier", tc.src, tc.dst)
		}
	}
	partial := tiers.Rules{{Source: tiers.L0, Allowed: allTiers}}
	if partial.Allowed(tiers.L1, tiers.L0) {
		t.Error("Allowed(L1, L0) = true with no rule for L1")
	}
	if !partial.Allowed(tiers.L0, tiers.L3) {
		t.Error("Allowed(L0, L3) = false with L0 -> all")
	}
	var none tiers.Rules
	if none.Allowed(tiers.L0, tiers.L0) {
		t.Error("nil Rules allowed L0 -> L0")
	}
	// A rule listing an invalid tier never makes that tier reachable.
	bad := tiers.Rules{{Source: tiers.L0, Allowed: []tiers.Tier{9}}}
	if bad.Allowed(tiers.L0, 9) {
		t.Error("Allowed(L0, L?(9)) = true")
	}
}

type outcome int

const (
	deliver outcome = iota
	violation
	escalation
)

func (o outcome) String() string {
	return [...]string{"deliver", "TIER_VIOLATION", "ESCALATION_REQUIRED"}[o]
}

func outcomeOf(t *testing.T, m tiers.Message, err error) outcome {
	t.Helper()
	var v *tiers.ViolationError
	var e *tiers.EscalationRequiredError
	switch {
	case err == nil:
		return deliver
	case errors.As(err, &v):
		if v.Source != m.Source || v.Target != m.Target || v.Type != m.Type {
			t.Errorf("ViolationError%+v does not describe %+v", *v, m)
		}
		return violation
	case errors.As(err, &e):
		if e.Source != m.Source || e.Target != m.Target || e.Type != m.Type {
			t.Errorf("EscalationRequiredError%+v does not describe %+v", *e, m)
		}
		return escalation
	}
	t.Fatalf("Check(%+v) returned an untyped error %v", m, err)
	return 0
}

// TestCheckExhaustive runs Check with the default rules over the whole input
// space and compares every answer with an expectation written from the seed's
// requirements, independently of the implementation.
func TestCheckExhaustive(t *testing.T) {
	expect := func(m tiers.Message) outcome {
		// 11.3: "WHEN an L0 agent broadcasts a directive, THE A2A_Router
		// SHALL deliver it to all agents regardless of tier."
		if m.Broadcast && m.Source == tiers.L0 {
			return deliver
		}
		// Replies travel back along the path the request came.
		if m.Reply {
			return deliver
		}
		// 4.5, the route table.
		if !seedRoutes[m.Source][m.Target] {
			return violation
		}
		// 11.2: "WHEN an L2 or L3 agent sends a "task-proposal" to an L0 or
		// L1 agent, THE A2A_Router SHALL require the proposal to include an
		// escalation justification field."
		lower := m.Source == tiers.L2 || m.Source == tiers.L3
		upper := m.Target == tiers.L0 || m.Target == tiers.L1
		if lower && upper && m.Type == "task-proposal" && strings.TrimSpace(m.Justification) == "" {
			return escalation
		}
		return deliver
	}

	rules := tiers.DefaultRules()
	justifications := []struct{ name, text string }{
		{"absent", ""}, {"blank", " \t\n"}, {"present", "needs architectural sign-off"},
	}
	n := 0
	counts := map[outcome]int{}
	for _, src := range allTiers {
		for _, dst := range allTiers {
			for _, typ := range []string{"task-proposal", "request"} {
				for _, j := range justifications {
					for _, reply := range []bool{false, true} {
						for _, broadcast := range []bool{false, true} {
							m := tiers.Message{Source: src, Target: dst, Type: typ,
								Justification: j.text, Reply: reply, Broadcast: broadcast}
							name := fmt.Sprintf("%v->%v/%s/justification=%s/reply=%v/broadcast=%v",
								src, dst, typ, j.name, reply, broadcast)
							got := outcomeOf(t, m, rules.Check(m))
							if want := expect(m); got != want {
								t.Errorf("%s: Check = %v, want %v", name, got, want)
							}
							counts[got]++
							n++
						}
					}
				}
			}
		}
	}
	if n != 4*4*2*3*2*2 {
		t.Errorf("covered %d cases", n)
	}
	// Not vacuous: every outcome occurs.
	for _, o := range []outcome{deliver, violation, escalation} {
		if counts[o] == 0 {
			t.Errorf("no case produced %v", o)
		}
	}
}

func TestCheckInvalidTiers(t *testing.T) {
	rules := tiers.DefaultRules()
	for _, m := range []tiers.Message{
		{Source: 4, Target: tiers.L0, Type: "request"},
		{Source: tiers.L0, Target: 4, Type: "request", Broadcast: true},
		{Source: tiers.L3, Target: 200, Type: "response", Reply: true},
		{Source: 255, Target: 255, Type: "task-proposal", Justification: "why"},
	} {
		if got := outcomeOf(t, m, rules.Check(m)); got != violation {
			t.Errorf("Check(%+v) = %v, want %v", m, got, violation)
		}
	}
}

func TestCheckCustomRules(t *testing.T) {
	// L1 must justify proposals to L0; L2 need not; L3 may only talk to L3.
	rules := tiers.Rules{
		{Source: tiers.L3, Allowed: []tiers.Tier{tiers.L3}, RequiresEscalationJustification: true},
		{Source: tiers.L2, Allowed: []tiers.Tier{tiers.L0, tiers.L1, tiers.L2}},
		{Source: tiers.L1, Allowed: []tiers.Tier{tiers.L0, tiers.L1, tiers.L2}, RequiresEscalationJustification: true},
		{Source: tiers.L0, Allowed: []tiers.Tier{tiers.L0}},
	}
	for _, tc := range []struct {
		m    tiers.Message
		want outcome
	}{
		{tiers.Message{Source: tiers.L1, Target: tiers.L0, Type: "task-proposal"}, escalation},
		{tiers.Message{Source: tiers.L1, Target: tiers.L0, Type: "task-proposal", Justification: "x"}, deliver},
		{tiers.Message{Source: tiers.L1, Target: tiers.L1, Type: "task-proposal"}, deliver}, // not upward
		{tiers.Message{Source: tiers.L1, Target: tiers.L2, Type: "task-proposal"}, deliver}, // downward
		{tiers.Message{Source: tiers.L2, Target: tiers.L0, Type: "task-proposal"}, deliver}, // no requirement
		{tiers.Message{Source: tiers.L3, Target: tiers.L0, Type: "task-proposal", Justification: "x"}, violation},
		{tiers.Message{Source: tiers.L3, Target: tiers.L3, Type: "task-proposal"}, deliver},
		{tiers.Message{Source: tiers.L0, Target: tiers.L3, Type: "request"}, violation},
		{tiers.Message{Source: tiers.L0, Target: tiers.L3, Type: "notification", Broadcast: true}, deliver},
		{tiers.Message{Source: tiers.L3, Target: tiers.L2, Type: "notification", Broadcast: true}, violation},
		{tiers.Message{Source: tiers.L3, Target: tiers.L0, Type: "response", Reply: true}, deliver},
	} {
		if got := outcomeOf(t, tc.m, rules.Check(tc.m)); got != tc.want {
			t.Errorf("Check(%+v) = %v, want %v", tc.m, got, tc.want)
		}
	}
	// A rule set without a rule for the source tier denies everything but
	// L0 broadcasts and replies.
	var none tiers.Rules
	m := tiers.Message{Source: tiers.L2, Target: tiers.L2, Type: "request"}
	if got := outcomeOf(t, m, none.Check(m)); got != violation {
		t.Errorf("nil Rules: Check(%+v) = %v, want %v", m, got, violation)
	}
}

func TestErrors(t *testing.T) {
	rules := tiers.DefaultRules()

	verr := rules.Check(tiers.Message{Source: tiers.L1, Target: tiers.L3, Type: "request"})
	if !errors.Is(verr, tiers.ErrTierViolation) || errors.Is(verr, tiers.ErrEscalationRequired) {
		t.Errorf("violation %v: errors.Is mismatch", verr)
	}
	wrapped := fmt.Errorf("route to %s: %w", "atlas", verr)
	if !errors.Is(wrapped, tiers.ErrTierViolation) {
		t.Error("wrapped violation does not match ErrTierViolation")
	}
	eerr := rules.Check(tiers.Message{Source: tiers.L3, Target: tiers.L0, Type: "task-proposal"})
	if !errors.Is(eerr, tiers.ErrEscalationRequired) || errors.Is(eerr, tiers.ErrTierViolation) {
		t.Errorf("escalation %v: errors.Is mismatch", eerr)
	}

	type coder interface{ Code() string }
	for _, tc := range []struct {
		err  error
		code string
		want []string
	}{
		{verr, "TIER_VIOLATION", []string{"tiers: ", "L1", "L3", `"request"`}},
		{eerr, "ESCALATION_REQUIRED", []string{"tiers: ", "L3", "L0", `"task-proposal"`, "justification"}},
		{rules.Check(tiers.Message{Source: 6, Target: tiers.L0, Type: "notification"}),
			"TIER_VIOLATION", []string{"tiers: ", "invalid", "L?(6)", "L0", `"notification"`}},
	} {
		var c coder
		if !errors.As(tc.err, &c) || c.Code() != tc.code {
			t.Errorf("%v: Code() mismatch, want %s", tc.err, tc.code)
		}
		msg := tc.err.Error()
		if msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("%q does not start in lower case", msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q does not mention %q", msg, w)
			}
		}
	}
	if tiers.CodeTierViolation != "TIER_VIOLATION" || tiers.CodeEscalationRequired != "ESCALATION_REQUIRED" {
		t.Error("error codes differ from the seed's")
	}
}
