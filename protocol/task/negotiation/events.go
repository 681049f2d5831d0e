package negotiation

import "time"

// EventType names what happened to a proposal.
type EventType string

// The events a Negotiator emits.
const (
	// EvtProposalSent: a local agent's proposal was posted.
	EvtProposalSent EventType = "proposal-sent"
	// EvtProposalReceived: a proposal to a local agent arrived.
	EvtProposalReceived EventType = "proposal-received"
	// EvtProposalAccepted: a proposal was accepted (sent: the target
	// answered; received: a local agent accepted).
	EvtProposalAccepted EventType = "proposal-accepted"
	// EvtProposalRejected: a proposal was rejected.
	EvtProposalRejected EventType = "proposal-rejected"
	// EvtProposalTimedOut: the deadline passed without an answer; Code is
	// PROPOSAL_TIMEOUT. For a sent proposal this is the proposer's
	// notification (outcome handlers are called too).
	EvtProposalTimedOut EventType = "proposal-timed-out"
	// EvtAnswerIgnored: an answer came late (Code PROPOSAL_TIMEOUT or
	// PROPOSAL_WRONG_STATE), from the wrong agent (ANSWER_NOT_ATTRIBUTED)
	// or malformed (INVALID_PROPOSAL).
	EvtAnswerIgnored EventType = "answer-ignored"
	// EvtProposalInvalid: a received proposal was malformed and was
	// rejected with reason INVALID_PROPOSAL.
	EvtProposalInvalid EventType = "proposal-invalid"
	// EvtStoreFailed: a record could not be written to or read from the
	// store; Detail has the error.
	EvtStoreFailed EventType = "store-failed"
)

// Event is one observable step of a negotiation. Events are handed to
// Config.Emit synchronously: Emit must not block.
type Event struct {
	Type       EventType `json:"type"`
	Time       time.Time `json:"time"`
	ProposalID string    `json:"proposalId,omitempty"`
	Thread     string    `json:"thread,omitempty"`
	Direction  Direction `json:"direction,omitempty"`
	Proposer   string    `json:"proposer,omitempty"`
	Target     string    `json:"target,omitempty"`
	// From is the sender of the envelope that caused the event, when it
	// is not Proposer (an answer).
	From   string `json:"from,omitempty"`
	Status Status `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}
