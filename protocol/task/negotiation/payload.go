package negotiation

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Limits enforced by Validate and the decoders. Lengths are in bytes of UTF-8.
const (
	MaxPayloadSize     = 64 << 10                     // an encoded proposal, accept or reject
	MaxDescriptionLen  = 16 << 10                     // taskDescription
	MaxCapabilities    = 64                           // entries in requiredCapabilities
	MaxCapabilityLen   = agentcard.MaxCapabilityIDLen // one capability id
	MaxAgentLen        = envelope.MaxAgentLen         // agent addresses
	MaxReasonLen       = 64                           // a reject reason code
	MaxEstimateMs      = 1 << 53                      // estimatedCompletionMs; deadlineMs too
	maxJSONSafeInteger = 1 << 53
)

// Complexity is a proposal's estimated complexity.
type Complexity string

// The three complexities of the seed.
const (
	ComplexitySimple  Complexity = "simple"
	ComplexityMedium  Complexity = "medium"
	ComplexityComplex Complexity = "complex"
)

// Valid reports whether c is simple, medium or complex.
func (c Complexity) Valid() bool {
	return c == ComplexitySimple || c == ComplexityMedium || c == ComplexityComplex
}

// Reason codes commonly carried by a [Reject]. Any code matching
// ^[A-Z][A-Z0-9_]{0,63}$ is valid.
const (
	ReasonBusy              = "BUSY"               // the agent has no capacity now
	ReasonCapabilityMissing = "CAPABILITY_MISSING" // the agent lacks a required capability
	ReasonDeclined          = "DECLINED"           // the agent chose not to take it
	ReasonInvalidProposal   = "INVALID_PROPOSAL"   // the proposal payload was malformed
)

// Proposal is the payload of a "task-proposal" envelope (property 23).
type Proposal struct {
	// TaskDescription says what to do: 1 to MaxDescriptionLen bytes of
	// UTF-8, not blank, no control characters but tab, newline and CR.
	TaskDescription string `json:"taskDescription"`
	// RequiredCapabilities are capability ids, at most MaxCapabilities,
	// unique, each like an agent card's capability id. May be empty (any
	// agent will do) but is always present on the wire.
	RequiredCapabilities []string `json:"requiredCapabilities"`
	// EstimatedComplexity is simple, medium or complex.
	EstimatedComplexity Complexity `json:"estimatedComplexity"`
	// DeadlineMs is the absolute response deadline in unix milliseconds:
	// no answer by then and the proposal is timed-out.
	DeadlineMs int64 `json:"deadlineMs"`
	// ProposerAgentID is the proposing agent; it must name the envelope's
	// sender ([SameAgent]).
	ProposerAgentID string `json:"proposerAgentId"`
}

// MarshalJSON writes requiredCapabilities as [] rather than null when empty.
func (p Proposal) MarshalJSON() ([]byte, error) {
	type plain Proposal
	q := plain(p)
	if q.RequiredCapabilities == nil {
		q.RequiredCapabilities = []string{}
	}
	return json.Marshal(q)
}

// Deadline returns DeadlineMs as a time.
func (p Proposal) Deadline() time.Time { return time.UnixMilli(p.DeadlineMs) }

// Validate returns nil or an [*InvalidError] naming the first field that
// breaks a rule.
func (p Proposal) Validate() error {
	if err := checkDescription("taskDescription", p.TaskDescription); err != nil {
		return err
	}
	if err := checkCapabilities("requiredCapabilities", p.RequiredCapabilities); err != nil {
		return err
	}
	if !p.EstimatedComplexity.Valid() {
		return invalid("estimatedComplexity", "must be \"simple\", \"medium\" or \"complex\", got %s",
			wirecodec.Quote(string(p.EstimatedComplexity)))
	}
	if p.DeadlineMs <= 0 || p.DeadlineMs > maxJSONSafeInteger {
		return invalid("deadlineMs", "must be a positive unix time in milliseconds, got %d", p.DeadlineMs)
	}
	return checkAgent("proposerAgentId", p.ProposerAgentID, false)
}

// Accept is the payload of a "task-accept" envelope.
type Accept struct {
	// AcceptedBy is the accepting agent; it must name the envelope's sender.
	AcceptedBy string `json:"acceptedBy"`
	// EstimatedCompletionMs is how long the task should take, in
	// milliseconds from acceptance: positive, at most MaxEstimateMs.
	EstimatedCompletionMs int64 `json:"estimatedCompletionMs"`
}

// Validate returns nil or an [*InvalidError] naming the first field that
// breaks a rule.
func (a Accept) Validate() error {
	if err := checkAgent("acceptedBy", a.AcceptedBy, false); err != nil {
		return err
	}
	if a.EstimatedCompletionMs <= 0 || a.EstimatedCompletionMs > MaxEstimateMs {
		return invalid("estimatedCompletionMs", "must be a positive number of milliseconds, got %d", a.EstimatedCompletionMs)
	}
	return nil
}

// Reject is the payload of a "task-reject" envelope.
type Reject struct {
	// Reason is a reason code such as [ReasonBusy]: an upper-case letter
	// then up to 63 upper-case letters, digits and underscores.
	Reason string `json:"reason"`
	// AlternativeSuggestion optionally names an agent better suited.
	AlternativeSuggestion string `json:"alternativeSuggestion,omitempty"`
}

// Validate returns nil or an [*InvalidError] naming the first field that
// breaks a rule.
func (r Reject) Validate() error {
	if err := checkReason("reason", r.Reason); err != nil {
		return err
	}
	return checkAgent("alternativeSuggestion", r.AlternativeSuggestion, true)
}

// DecodeProposal decodes and validates a task-proposal payload. Input is
// untrusted: at most MaxPayloadSize bytes are read, every field is required
// (requiredCapabilities may be an empty list) and checked, unknown fields
// are ignored. Errors are [*InvalidError]s naming the field.
func DecodeProposal(b []byte) (Proposal, error) {
	var w struct {
		TaskDescription      *string          `json:"taskDescription"`
		RequiredCapabilities *[]string        `json:"requiredCapabilities"`
		EstimatedComplexity  *string          `json:"estimatedComplexity"`
		DeadlineMs           *json.RawMessage `json:"deadlineMs"`
		ProposerAgentID      *string          `json:"proposerAgentId"`
	}
	if err := decodeObject(b, &w); err != nil {
		return Proposal{}, err
	}
	switch {
	case w.TaskDescription == nil:
		return Proposal{}, invalid("taskDescription", "required")
	case w.RequiredCapabilities == nil:
		return Proposal{}, invalid("requiredCapabilities", "required (an empty list is allowed)")
	case w.EstimatedComplexity == nil:
		return Proposal{}, invalid("estimatedComplexity", "required")
	case w.DeadlineMs == nil:
		return Proposal{}, invalid("deadlineMs", "required")
	case w.ProposerAgentID == nil:
		return Proposal{}, invalid("proposerAgentId", "required")
	}
	deadline, err := decodeInt("deadlineMs", *w.DeadlineMs)
	if err != nil {
		return Proposal{}, err
	}
	p := Proposal{
		TaskDescription:      *w.TaskDescription,
		RequiredCapabilities: *w.RequiredCapabilities,
		EstimatedComplexity:  Complexity(*w.EstimatedComplexity),
		DeadlineMs:           deadline,
		ProposerAgentID:      *w.ProposerAgentID,
	}
	if p.RequiredCapabilities == nil {
		p.RequiredCapabilities = []string{}
	}
	return p, p.Validate()
}

// DecodeAccept decodes and validates a task-accept payload, with the same
// rules for untrusted input as [DecodeProposal].
func DecodeAccept(b []byte) (Accept, error) {
	var w struct {
		AcceptedBy            *string          `json:"acceptedBy"`
		EstimatedCompletionMs *json.RawMessage `json:"estimatedCompletionMs"`
	}
	if err := decodeObject(b, &w); err != nil {
		return Accept{}, err
	}
	if w.AcceptedBy == nil {
		return Accept{}, invalid("acceptedBy", "required")
	}
	if w.EstimatedCompletionMs == nil {
		return Accept{}, invalid("estimatedCompletionMs", "required")
	}
	est, err := decodeInt("estimatedCompletionMs", *w.EstimatedCompletionMs)
	if err != nil {
		return Accept{}, err
	}
	a := Accept{AcceptedBy: *w.AcceptedBy, EstimatedCompletionMs: est}
	return a, a.Validate()
}

// DecodeReject decodes and validates a task-reject payload, with the same
// rules for untrusted input as [DecodeProposal]. The seed's field name
// "rejectionReason" is accepted when "reason" is absent.
func DecodeReject(b []byte) (Reject, error) {
	var w struct {
		Reason                *string `json:"reason"`
		RejectionReason       *string `json:"rejectionReason"`
		AlternativeSuggestion *string `json:"alternativeSuggestion"`
	}
	if err := decodeObject(b, &w); err != nil {
		return Reject{}, err
	}
	if w.Reason == nil {
		w.Reason = w.RejectionReason
	}
	if w.Reason == nil {
		return Reject{}, invalid("reason", "required")
	}
	r := Reject{Reason: *w.Reason}
	if w.AlternativeSuggestion != nil {
		r.AlternativeSuggestion = *w.AlternativeSuggestion
	}
	return r, r.Validate()
}

// decodeObject checks the size and that b is one JSON object, then decodes it.
func decodeObject(b []byte, v any) error {
	if len(b) > MaxPayloadSize {
		return invalid("", "%d bytes, over the %d-byte limit", len(b), MaxPayloadSize)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return invalid("", "must be a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return &InvalidError{Field: field, Reason: "malformed: " + wirecodec.Truncate(err.Error(), 200), cause: err}
	}
	return nil
}

// decodeInt reads a JSON number that must be an integer in 0..2^53
// (JavaScript's safe range), accepting forms such as 1.7e12 that JavaScript
// encoders produce.
func decodeInt(field string, raw json.RawMessage) (int64, error) {
	s := strings.TrimSpace(string(raw))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxJSONSafeInteger {
			return 0, invalid(field, "%d is out of range 0..2^53", n)
		}
		return n, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, invalid(field, "must be a number")
	}
	if f != math.Trunc(f) || f < 0 || f > maxJSONSafeInteger {
		return 0, invalid(field, "must be a whole number in 0..2^53")
	}
	return int64(f), nil
}

// checkDescription: non-blank UTF-8 text without control characters other
// than tab, newline and carriage return (envelope.CheckText).
func checkDescription(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return invalid(field, "must not be empty: say what the task is")
	}
	return checkText(field, s, MaxDescriptionLen, true)
}

// checkAgent: an agent address, 1..MaxAgentLen bytes without leading or
// trailing white space, no control characters (envelope.CheckText).
func checkAgent(field, s string, optional bool) error {
	if s == "" {
		if optional {
			return nil
		}
		return invalid(field, "must not be empty: give an agent name or name@peerID")
	}
	if strings.TrimSpace(s) != s {
		return invalid(field, "leading or trailing white space in %s", wirecodec.Quote(s))
	}
	return checkText(field, s, MaxAgentLen, false)
}

// checkText reports envelope.CheckText's verdict on s as field's.
func checkText(field, s string, limit int, newlines bool) error {
	if err := envelope.CheckText(s, limit, newlines); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}

// checkCapabilities: at most MaxCapabilities unique capability ids.
func checkCapabilities(field string, caps []string) error {
	if len(caps) > MaxCapabilities {
		return invalid(field, "%d entries, over the limit of %d", len(caps), MaxCapabilities)
	}
	for i, c := range caps {
		f := field + "[" + strconv.Itoa(i) + "]"
		if err := agentcard.CheckCapabilityID(c); err != nil {
			return invalid(f, "%s", err.Error())
		}
		for j := range i {
			if caps[j] == c {
				return invalid(f, "duplicates %s[%d] (%s)", field, j, wirecodec.Quote(c))
			}
		}
	}
	return nil
}

// checkReason: an upper-case reason code.
func checkReason(field, s string) error {
	if s == "" {
		return invalid(field, "must not be empty: give a reason code such as %s", ReasonDeclined)
	}
	if len(s) > MaxReasonLen {
		return invalid(field, "%d bytes, over the %d-byte limit", len(s), MaxReasonLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '_')
		if !ok {
			return invalid(field, "%s is not a reason code: use upper-case letters, digits and _ (such as %s)",
				wirecodec.Quote(s), ReasonBusy)
		}
	}
	return nil
}
