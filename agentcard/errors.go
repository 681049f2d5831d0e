package agentcard

import (
	"fmt"
	"strings"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Error codes, as in the seed's error table. They cross the wire; every error
// of this package returns one of them from its Code method.
const (
	// CodeInvalidCard: a card is missing required fields, breaks a
	// validation rule, or fails its signature checks.
	CodeInvalidCard = "INVALID_CARD"
	// CodeAgentNotFound: no visible card matches an address.
	CodeAgentNotFound = "AGENT_NOT_FOUND"
	// CodeCapabilityNotFound: no visible card offers a capability.
	CodeCapabilityNotFound = "CAPABILITY_NOT_FOUND"
	// CodeAmbiguousAgent: a bare agent name matches cards on several nodes.
	CodeAmbiguousAgent = "AMBIGUOUS_AGENT"
	// CodeTooManyCards: a host already has [MaxRemoteCardsPerHost] cards in
	// the registry. Not a seed code: nova's own.
	CodeTooManyCards = "TOO_MANY_CARDS"
)

// codedError is the type of the sentinels: an error with a seed code.
type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Code() string  { return e.code }

// ErrInvalidCard is matched (errors.Is) by every [*InvalidCardError]. Its
// Code is [CodeInvalidCard].
var ErrInvalidCard error = &codedError{CodeInvalidCard, "agentcard: invalid card"}

// ErrAgentNotFound is matched (errors.Is) by every [*NotFoundError] and
// [*AddressError]. Its Code is [CodeAgentNotFound].
var ErrAgentNotFound error = &codedError{CodeAgentNotFound, "agentcard: agent not found"}

// ErrCapabilityNotFound is matched (errors.Is) by every
// [*CapabilityNotFoundError]. Its Code is [CodeCapabilityNotFound].
var ErrCapabilityNotFound error = &codedError{CodeCapabilityNotFound, "agentcard: capability not found"}

// ErrAmbiguousAgent is matched (errors.Is) by every [*AmbiguousError]. Its
// Code is [CodeAmbiguousAgent].
var ErrAmbiguousAgent error = &codedError{CodeAmbiguousAgent, "agentcard: ambiguous agent"}

// ErrTooManyCards is matched (errors.Is) by every [*TooManyCardsError]. Its
// Code is [CodeTooManyCards].
var ErrTooManyCards error = &codedError{CodeTooManyCards, "agentcard: too many cards from one host"}

// TooManyCardsError reports a remote card refused because its host already
// has [MaxRemoteCardsPerHost] (Limit) cards in the registry. Host is the
// card's host and ID its agent id.
type TooManyCardsError struct {
	Host  string
	ID    string
	Limit int
}

func (e *TooManyCardsError) Error() string {
	return fmt.Sprintf("agentcard: too many cards from host %s: card %s refused (at most %d per host)", wirecodec.Quote(e.Host), wirecodec.Quote(e.ID), e.Limit)
}

// Code returns [CodeTooManyCards].
func (e *TooManyCardsError) Code() string { return CodeTooManyCards }

// Is reports whether target is [ErrTooManyCards].
func (e *TooManyCardsError) Is(target error) bool { return target == ErrTooManyCards }

// FieldProblem is one validation failure. Field is the JSON path of the
// offending value ("id", "capabilities[2].id"); Reason says what is wrong.
type FieldProblem struct {
	Field  string
	Reason string
}

func (p FieldProblem) String() string {
	if p.Field == "" {
		return p.Reason
	}
	return p.Field + ": " + p.Reason
}

// InvalidCardError lists every problem found in a card, in field order. It
// is returned by [Card.Validate], by the registry when it refuses a card, by
// JSON decoding, and by [Open] when a signed card fails a check (problems
// on the pseudo-fields "envelope", "signature" and "payloadType", or "host"
// when the signer is not the card's host).
type InvalidCardError struct {
	Problems []FieldProblem
}

func (e *InvalidCardError) Error() string {
	if len(e.Problems) == 0 {
		return "agentcard: invalid card"
	}
	var b strings.Builder
	b.WriteString("agentcard: invalid card: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Code returns [CodeInvalidCard].
func (e *InvalidCardError) Code() string { return CodeInvalidCard }

// Is reports whether target is [ErrInvalidCard].
func (e *InvalidCardError) Is(target error) bool { return target == ErrInvalidCard }

// HasField reports whether one of the problems is about field.
func (e *InvalidCardError) HasField(field string) bool {
	for _, p := range e.Problems {
		if p.Field == field {
			return true
		}
	}
	return false
}

func invalid(field, format string, args ...any) *InvalidCardError {
	return &InvalidCardError{Problems: []FieldProblem{{Field: field, Reason: fmt.Sprintf(format, args...)}}}
}

// NotFoundError reports an address that matches no visible card. Where says
// what was searched, e.g. "local registry (3 agents) and 12 remote cards".
type NotFoundError struct {
	Query string
	Where string
}

func (e *NotFoundError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("agentcard: agent not found: %q", e.Query)
	}
	return fmt.Sprintf("agentcard: agent not found: %q (searched %s)", e.Query, e.Where)
}

// Code returns [CodeAgentNotFound].
func (e *NotFoundError) Code() string { return CodeAgentNotFound }

// Is reports whether target is [ErrAgentNotFound].
func (e *NotFoundError) Is(target error) bool { return target == ErrAgentNotFound }

// CapabilityNotFoundError reports a capability that no visible card offers.
type CapabilityNotFoundError struct {
	Capability string
	Where      string
}

func (e *CapabilityNotFoundError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("agentcard: capability not found: %q", e.Capability)
	}
	return fmt.Sprintf("agentcard: capability not found: %q (searched %s)", e.Capability, e.Where)
}

// Code returns [CodeCapabilityNotFound].
func (e *CapabilityNotFoundError) Code() string { return CodeCapabilityNotFound }

// Is reports whether target is [ErrCapabilityNotFound].
func (e *CapabilityNotFoundError) Is(target error) bool { return target == ErrCapabilityNotFound }

// AmbiguousError reports a bare agent name that matches cards hosted on
// several nodes. Candidates are their full addresses ("name@<peerID>"),
// sorted; any of them resolves uniquely.
type AmbiguousError struct {
	Name       string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("agentcard: ambiguous agent %q: %d candidates: %s; use a full address",
		e.Name, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// Code returns [CodeAmbiguousAgent].
func (e *AmbiguousError) Code() string { return CodeAmbiguousAgent }

// Is reports whether target is [ErrAmbiguousAgent].
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguousAgent }

// AddressError reports an agent address that cannot name any agent: a bad
// agent id, or a bad peer ID after '@'. A malformed address names no agent,
// so it carries [CodeAgentNotFound] and matches [ErrAgentNotFound].
type AddressError struct {
	Address string
	Reason  string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("agentcard: invalid agent address %s: %s", wirecodec.Quote(e.Address), e.Reason)
}

// Code returns [CodeAgentNotFound].
func (e *AddressError) Code() string { return CodeAgentNotFound }

// Is reports whether target is [ErrAgentNotFound].
func (e *AddressError) Is(target error) bool { return target == ErrAgentNotFound }
