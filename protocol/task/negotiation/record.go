package negotiation

import (
	"slices"
	"time"
)

// Direction says whether this node sent a proposal or received it.
type Direction string

// The two directions.
const (
	Sent     Direction = "sent"     // a local agent proposed it
	Received Direction = "received" // it was proposed to a local agent
)

// Status is where a proposal stands.
type Status string

// The four statuses of the seed.
const (
	StatusPending  Status = "pending"   // not answered yet
	StatusAccepted Status = "accepted"  // the target accepted
	StatusRejected Status = "rejected"  // the target rejected
	StatusTimedOut Status = "timed-out" // no answer by the deadline
)

// Terminal reports whether s is final (anything but pending).
func (s Status) Terminal() bool { return s != StatusPending }

// Record is one proposal as this node knows it. It is a plain value: the
// Negotiator returns copies. JSON names are stable (records are stored).
type Record struct {
	// ProposalID is the id of the task-proposal envelope.
	ProposalID string `json:"proposalId"`
	// Thread is the correlation thread of the task: the proposal's
	// ThreadID (its own id for a proposal that starts the thread).
	Thread string `json:"thread"`
	// Direction is sent or received.
	Direction Direction `json:"direction"`
	// Proposer is the proposing agent's address; for a received proposal
	// the envelope's sender as delivered.
	Proposer string `json:"proposer"`
	// Target is the agent proposed to, or the capability id of a
	// capability-routed proposal (ByCapability).
	Target string `json:"target"`
	// ByCapability marks a capability-routed proposal.
	ByCapability bool `json:"byCapability,omitempty"`
	// Tag is an opaque local label given by the proposer
	// (ProposeOptions.Tag), for example the swarm a proposal recruits
	// for. It does not travel on the wire.
	Tag string `json:"tag,omitempty"`
	// Proposal is the payload.
	Proposal Proposal `json:"proposal"`
	// Status is pending, accepted, rejected or timed-out.
	Status Status `json:"status"`
	// AnsweredBy is the agent whose answer decided the proposal.
	AnsweredBy string `json:"answeredBy,omitempty"`
	// AcceptedBy and EstimatedCompletionMs come from the accept.
	AcceptedBy            string `json:"acceptedBy,omitempty"`
	EstimatedCompletionMs int64  `json:"estimatedCompletionMs,omitempty"`
	// RejectionReason and AlternativeSuggestion come from the reject.
	RejectionReason       string `json:"rejectionReason,omitempty"`
	AlternativeSuggestion string `json:"alternativeSuggestion,omitempty"`
	// CreatedAt and UpdatedAt are unix milliseconds of this node's clock.
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
}

// Deadline returns the proposal's response deadline.
func (r Record) Deadline() time.Time { return time.UnixMilli(r.Proposal.DeadlineMs) }

// Terminal reports whether the proposal has been decided.
func (r Record) Terminal() bool { return r.Status.Terminal() }

// clone returns a deep copy of r.
func (r Record) clone() Record {
	r.Proposal.RequiredCapabilities = slices.Clone(r.Proposal.RequiredCapabilities)
	return r
}

// key is the record's key in the store and in memory.
func (r Record) key() string { return recordKey(r.Direction, r.ProposalID) }

func recordKey(d Direction, id string) string { return string(d) + "/" + id }
