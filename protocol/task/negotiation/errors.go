package negotiation

import (
	"errors"
	"fmt"
	"time"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Error codes of this package. PROPOSAL_TIMEOUT is the seed's; the others are
// nova-node's. Every error this package returns carries one through its Code
// method.
const (
	// CodeProposalTimeout: a proposal's response deadline passed without an
	// answer, or an answer came too late.
	CodeProposalTimeout = "PROPOSAL_TIMEOUT"
	// CodeProposalNotFound: no proposal with that id on this node.
	CodeProposalNotFound = "PROPOSAL_NOT_FOUND"
	// CodeInvalidProposal: a proposal, accept or reject payload breaks a rule.
	CodeInvalidProposal = "INVALID_PROPOSAL"
	// CodeWrongState: the proposal is not in the state the operation needs
	// (answering needs pending, a task thread needs accepted).
	CodeWrongState = "PROPOSAL_WRONG_STATE"
	// CodeAnswerNotAttributed: an answer came from an agent the proposal was
	// not sent to.
	CodeAnswerNotAttributed = "ANSWER_NOT_ATTRIBUTED"
	// CodeNegotiatorClosed: the Negotiator is not running.
	CodeNegotiatorClosed = "NEGOTIATOR_CLOSED"
)

// codedError is the type of the sentinels.
type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }

// Code returns the error's code.
func (e *codedError) Code() string { return e.code }

// Sentinels, matched with errors.Is by the typed errors of the same code.
var (
	// ErrProposalTimeout is matched by every [*TimeoutError].
	ErrProposalTimeout error = &codedError{CodeProposalTimeout, "negotiation: proposal timed out"}
	// ErrProposalNotFound is matched by every [*NotFoundError].
	ErrProposalNotFound error = &codedError{CodeProposalNotFound, "negotiation: proposal not found"}
	// ErrInvalidProposal is matched by every [*InvalidError].
	ErrInvalidProposal error = &codedError{CodeInvalidProposal, "negotiation: invalid proposal"}
	// ErrWrongState is matched by every [*StateError].
	ErrWrongState error = &codedError{CodeWrongState, "negotiation: proposal is in the wrong state"}
	// ErrNotAttributed is matched by every [*AttributionError].
	ErrNotAttributed error = &codedError{CodeAnswerNotAttributed, "negotiation: answer not attributed"}
	// ErrClosed is returned by a Negotiator that is not started or is
	// closed: call Start first, or create a new Negotiator after Close.
	ErrClosed error = &codedError{CodeNegotiatorClosed, "negotiation: negotiator is not running (call Start; a closed negotiator cannot be reused)"}
)

// InvalidError reports a payload that breaks a rule. Field is the JSON name
// of the offending field ("taskDescription", "requiredCapabilities[2]"),
// empty when the rule concerns the payload as a whole.
type InvalidError struct {
	Field  string
	Reason string
	cause  error
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "negotiation: invalid payload: " + e.Reason
	}
	return "negotiation: invalid " + e.Field + ": " + e.Reason
}

// Code returns [CodeInvalidProposal].
func (e *InvalidError) Code() string { return CodeInvalidProposal }

// Is reports whether target is [ErrInvalidProposal].
func (e *InvalidError) Is(target error) bool { return target == ErrInvalidProposal }

// Unwrap returns the decoder error behind e, if any.
func (e *InvalidError) Unwrap() error { return e.cause }

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// NotFoundError reports an unknown proposal id. Its message names no API,
// as it reaches the users of programs built on this package (the CLI shows
// it): [Negotiator.ListPending] and [Negotiator.List] list the ids there
// are; ids are case-sensitive.
type NotFoundError struct {
	ProposalID string
	Direction  Direction // what was searched: sent, received, or empty for both
}

func (e *NotFoundError) Error() string {
	what := "proposal"
	if e.Direction != "" {
		what = string(e.Direction) + " proposal"
	}
	return "negotiation: no " + what + " " + wirecodec.Quote(e.ProposalID) + " on this node (ids are case-sensitive)"
}

// Code returns [CodeProposalNotFound].
func (e *NotFoundError) Code() string { return CodeProposalNotFound }

// Is reports whether target is [ErrProposalNotFound].
func (e *NotFoundError) Is(target error) bool { return target == ErrProposalNotFound }

// TimeoutError reports a proposal whose response deadline has passed.
type TimeoutError struct {
	ProposalID string
	DeadlineMs int64 // the proposal's deadline, unix milliseconds
}

func (e *TimeoutError) Error() string {
	return "negotiation: proposal " + wirecodec.Quote(e.ProposalID) + " timed out: its response deadline " +
		time.UnixMilli(e.DeadlineMs).UTC().Format(time.RFC3339) +
		" has passed; the proposer must send a new proposal"
}

// Code returns [CodeProposalTimeout].
func (e *TimeoutError) Code() string { return CodeProposalTimeout }

// Is reports whether target is [ErrProposalTimeout].
func (e *TimeoutError) Is(target error) bool { return target == ErrProposalTimeout }

// StateError reports an operation on a proposal in the wrong state: an
// answer to one that is no longer pending (or is being answered right now),
// or a task message for one that is not accepted.
type StateError struct {
	ProposalID string
	Status     Status // the proposal's status
	Want       Status // the status the operation needs; empty means pending
}

func (e *StateError) Error() string {
	want, hint := e.Want, "it can be answered only once"
	if want == "" {
		want = StatusPending
	}
	if want == StatusAccepted {
		hint = "only an accepted proposal has a task thread"
	}
	return "negotiation: proposal " + wirecodec.Quote(e.ProposalID) + " is " + string(e.Status) +
		", not " + string(want) + ": " + hint
}

// Code returns [CodeWrongState].
func (e *StateError) Code() string { return CodeWrongState }

// Is reports whether target is [ErrWrongState].
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// AttributionError reports an answer from an agent other than the
// proposal's target.
type AttributionError struct {
	ProposalID string
	Target     string // whom the proposal was sent to
	From       string // who answered
}

func (e *AttributionError) Error() string {
	return "negotiation: answer to proposal " + wirecodec.Quote(e.ProposalID) + " from " + wirecodec.Quote(e.From) +
		" ignored: only its target " + wirecodec.Quote(e.Target) + " may answer it"
}

// Code returns [CodeAnswerNotAttributed].
func (e *AttributionError) Code() string { return CodeAnswerNotAttributed }

// Is reports whether target is [ErrNotAttributed].
func (e *AttributionError) Is(target error) bool { return target == ErrNotAttributed }

// CodeOf returns the code of err (its Code method, searched with errors.As),
// or "" for nil and for an error without one.
func CodeOf(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}
