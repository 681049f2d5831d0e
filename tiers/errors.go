package tiers

import (
	"errors"
	"fmt"
)

// Error codes, as in the seed's error table. They travel on the wire; the
// typed errors below return them from their Code method.
const (
	// CodeTierViolation: a message violates the tier routing rules.
	CodeTierViolation = "TIER_VIOLATION"
	// CodeEscalationRequired: an L2/L3 → L0/L1 task proposal lacks a
	// justification.
	CodeEscalationRequired = "ESCALATION_REQUIRED"
)

// ErrTierViolation is matched (errors.Is) by every [*ViolationError].
var ErrTierViolation = errors.New("tiers: tier violation")

// ErrEscalationRequired is matched (errors.Is) by every
// [*EscalationRequiredError].
var ErrEscalationRequired = errors.New("tiers: escalation justification required")

// ViolationError reports a message whose target tier is not allowed for its
// source tier, or whose source or target is not a valid tier.
type ViolationError struct {
	Source, Target Tier
	Type           string // the envelope type
}

func (e *ViolationError) Error() string {
	if !e.Source.Valid() || !e.Target.Valid() {
		return fmt.Sprintf("tiers: tier violation: invalid tier in %s -> %s %q", e.Source, e.Target, e.Type)
	}
	return fmt.Sprintf("tiers: tier violation: %s may not send %q to %s", e.Source, e.Type, e.Target)
}

// Code returns [CodeTierViolation].
func (e *ViolationError) Code() string { return CodeTierViolation }

// Is reports whether target is [ErrTierViolation].
func (e *ViolationError) Is(target error) bool { return target == ErrTierViolation }

// EscalationRequiredError reports a task proposal from a lower tier to L0 or
// L1 that carries no escalation justification.
type EscalationRequiredError struct {
	Source, Target Tier
	Type           string // the envelope type ("task-proposal")
}

func (e *EscalationRequiredError) Error() string {
	return fmt.Sprintf("tiers: escalation justification required: %s -> %s %q needs metadata.escalationJustification",
		e.Source, e.Target, e.Type)
}

// Code returns [CodeEscalationRequired].
func (e *EscalationRequiredError) Code() string { return CodeEscalationRequired }

// Is reports whether target is [ErrEscalationRequired].
func (e *EscalationRequiredError) Is(target error) bool { return target == ErrEscalationRequired }
