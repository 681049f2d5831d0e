package tiers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// TypeTaskProposal is the envelope type to which escalation justification
// applies (requirement 11.2).
const TypeTaskProposal = "task-proposal"

// Rule is the seed's TierRule: the tiers a source tier may send to, and whether
// its task proposals to higher tiers need an escalation justification.
type Rule struct {
	Source                          Tier   `json:"sourceTier" yaml:"sourceTier"`
	Allowed                         []Tier `json:"allowedTargetTiers" yaml:"allowedTargetTiers"`
	RequiresEscalationJustification bool   `json:"requiresEscalationJustification" yaml:"requiresEscalationJustification"`
}

// Rules is the seed's TierRoutingConfig.rules: exactly one [Rule] per tier.
type Rules []Rule

// DefaultRules returns the seed's DEFAULT_TIER_RULES (requirement 4.5) as a
// fresh copy that the caller may modify:
//
//	L0 -> L0 L1 L2 L3
//	L1 -> L0 L1
//	L2 -> L0 L1 L2     (escalation justification required)
//	L3 -> L0 L1 L2 L3  (escalation justification required)
func DefaultRules() Rules {
	return Rules{
		{Source: L0, Allowed: []Tier{L0, L1, L2, L3}},
		{Source: L1, Allowed: []Tier{L0, L1}},
		{Source: L2, Allowed: []Tier{L0, L1, L2}, RequiresEscalationJustification: true},
		{Source: L3, Allowed: []Tier{L0, L1, L2, L3}, RequiresEscalationJustification: true},
	}
}

// Validate reports every way r falls short of one rule per tier: a rule for an
// invalid tier, an invalid allowed tier, a tier with two rules, a tier with
// none. An empty allowed list is valid (that tier may start no conversation).
// The errors are joined; each names the rule's index and tier.
func (r Rules) Validate() error {
	var errs []error
	first := [L3 + 1]int{-1, -1, -1, -1}
	for i, rule := range r {
		if !rule.Source.Valid() {
			errs = append(errs, fmt.Errorf("tiers: rule %d: invalid source tier %s", i, rule.Source))
		} else if j := first[rule.Source]; j >= 0 {
			errs = append(errs, fmt.Errorf("tiers: rule %d: duplicate rule for source tier %s (first is rule %d)", i, rule.Source, j))
		} else {
			first[rule.Source] = i
		}
		for _, t := range rule.Allowed {
			if !t.Valid() {
				errs = append(errs, fmt.Errorf("tiers: rule %d (source %s): invalid allowed target tier %s", i, rule.Source, t))
			}
		}
	}
	for t, i := range first {
		if i < 0 {
			errs = append(errs, fmt.Errorf("tiers: no rule for source tier %s", Tier(t)))
		}
	}
	return errors.Join(errs...)
}

// rule returns the first rule for src.
func (r Rules) rule(src Tier) (Rule, bool) {
	for _, rule := range r {
		if rule.Source == src {
			return rule, true
		}
	}
	return Rule{}, false
}

// Allowed reports whether src's rule lists dst as an allowed target tier. It is
// false for invalid tiers and for a source tier without a rule.
func (r Rules) Allowed(src, dst Tier) bool {
	if !src.Valid() || !dst.Valid() {
		return false
	}
	rule, ok := r.rule(src)
	return ok && slices.Contains(rule.Allowed, dst)
}

// Message is what [Rules.Check] needs to know about one delivery.
type Message struct {
	// Source and Target are the tiers of the sending and the receiving
	// agent, taken from their verified cards.
	Source, Target Tier
	// Type is the envelope type, e.g. "request" or "task-proposal".
	Type string
	// Justification is the envelope's metadata.escalationJustification.
	Justification string
	// Reply marks a "response" or "error" answering a request that Target
	// itself sent. The caller must have verified this. Replies are always
	// allowed back along the path the request came.
	Reply bool
	// Broadcast marks an envelope addressed to "*"; Target is then the tier
	// of one recipient.
	Broadcast bool
}

// Check decides whether m may be delivered: nil, a [*ViolationError] or an
// [*EscalationRequiredError]. The package documentation lists the rules in
// the order Check applies them.
func (r Rules) Check(m Message) error {
	if !m.Source.Valid() || !m.Target.Valid() {
		return &ViolationError{Source: m.Source, Target: m.Target, Type: m.Type}
	}
	if m.Broadcast && m.Source == L0 {
		return nil // an L0 directive reaches every tier (requirement 11.3)
	}
	if m.Reply {
		return nil
	}
	if !r.Allowed(m.Source, m.Target) {
		return &ViolationError{Source: m.Source, Target: m.Target, Type: m.Type}
	}
	rule, _ := r.rule(m.Source) // present: Allowed found it
	if m.Type == TypeTaskProposal && rule.RequiresEscalationJustification &&
		m.Target <= L1 && m.Target < m.Source && strings.TrimSpace(m.Justification) == "" {
		return &EscalationRequiredError{Source: m.Source, Target: m.Target, Type: m.Type}
	}
	return nil
}
