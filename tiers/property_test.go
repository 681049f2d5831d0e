package tiers_test

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/tiers"
)

// The seed's message types (requirement 2.5), plus a type outside the set:
// Check takes the type as a plain string and must not care.
var messageTypes = []string{
	"request", "response", "notification", "task-proposal", "task-accept",
	"task-reject", "stream-start", "stream-data", "stream-end", "error", "x-unknown",
}

// TestProperty16_TierRoutingEnforcement: for any sender tier T_s and recipient
// tier T_r, delivery is allowed iff T_r is in T_s's allowed target tiers; task
// proposals from L2/L3 to L0/L1 require an escalation justification. Checked
// for random rule sets and for the default rules.
func TestProperty16_TierRoutingEnforcement(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// The model: allowed[src][dst] and requires[src], drawn first; the
		// rule set is built from it in a random order.
		var allowed [4][4]bool
		var requires [4]bool
		useDefault := rapid.Bool().Draw(t, "defaultRules")
		var rules tiers.Rules
		if useDefault {
			rules = tiers.DefaultRules()
			allowed = seedRoutes
			requires = [4]bool{false, false, true, true}
		} else {
			for _, src := range allTiers {
				targets := rapid.SliceOfDistinct(rapid.SampledFrom(allTiers), rapid.ID[tiers.Tier]).
					Draw(t, "allowed"+src.String())
				for _, dst := range targets {
					allowed[src][dst] = true
				}
				requires[src] = rapid.Bool().Draw(t, "requires"+src.String())
				rules = append(rules, tiers.Rule{Source: src, Allowed: targets,
					RequiresEscalationJustification: requires[src]})
			}
			rules = rapid.Permutation(rules).Draw(t, "order")
		}
		if err := rules.Validate(); err != nil {
			t.Fatalf("generated rules are invalid: %v", err)
		}

		// Every sender and recipient tier, every flag, the seed's task
		// proposal and a few other types, and justifications both blank and
		// not (including a random one): 4 × 4 × 2 × 2 × 4 × 4 messages for
		// each random rule set.
		types := []string{"task-proposal", "request",
			rapid.SampledFrom(messageTypes).Draw(t, "type"), rapid.String().Draw(t, "anyType")}
		justifications := []string{"", "  \t", "blocked on a schema decision", rapid.String().Draw(t, "justification")}
		for _, src := range allTiers {
			for _, dst := range allTiers {
				for _, reply := range []bool{false, true} {
					for _, broadcast := range []bool{false, true} {
						for _, typ := range types {
							for _, j := range justifications {
								m := tiers.Message{Source: src, Target: dst, Type: typ,
									Justification: j, Reply: reply, Broadcast: broadcast}
								checkProperty16(t, rules, allowed, requires, useDefault, m)
							}
						}
					}
				}
			}
		}
	})
}

func checkProperty16(t *rapid.T, rules tiers.Rules, allowed [4][4]bool, requires [4]bool, useDefault bool, m tiers.Message) {
	err := rules.Check(m)
	isViolation := errors.Is(err, tiers.ErrTierViolation)
	isEscalation := errors.Is(err, tiers.ErrEscalationRequired)
	if err != nil && !isViolation && !isEscalation {
		t.Fatalf("Check(%+v) = untyped error %v", m, err)
	}
	if rules.Allowed(m.Source, m.Target) != allowed[m.Source][m.Target] {
		t.Fatalf("Allowed(%v, %v) = %v, want %v", m.Source, m.Target, !allowed[m.Source][m.Target], allowed[m.Source][m.Target])
	}
	if (m.Broadcast && m.Source == tiers.L0) || m.Reply {
		if err != nil {
			t.Fatalf("Check(%+v) = %v; L0 broadcasts and replies are always delivered", m, err)
		}
		return
	}
	// Delivery is refused for the route iff the target tier is not in the
	// source's allowed list.
	if isViolation != !allowed[m.Source][m.Target] {
		t.Fatalf("Check(%+v) = %v, but allowed[%v][%v] = %v", m, err, m.Source, m.Target, allowed[m.Source][m.Target])
	}
	blank := strings.TrimSpace(m.Justification) == ""
	wantEscalation := allowed[m.Source][m.Target] && requires[m.Source] &&
		m.Type == "task-proposal" && m.Target <= tiers.L1 && m.Target < m.Source && blank
	if isEscalation != wantEscalation {
		t.Fatalf("Check(%+v) = %v, want escalation required = %v", m, err, wantEscalation)
	}
	// With the seed's rules: L2/L3 -> L0/L1 task proposals need a
	// justification, and pass with one.
	if useDefault && m.Source >= tiers.L2 && m.Target <= tiers.L1 && m.Type == "task-proposal" {
		if blank != isEscalation || (!blank && err != nil) {
			t.Fatalf("default rules: Check(%+v) = %v", m, err)
		}
	}
}
