package taskswarm

import (
	"fmt"
	"strings"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/wirecodec"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// Error codes of this package. CAPABILITY_NOT_FOUND is the seed's (it is
// agentcard's code, and errors.Is matches agentcard.ErrCapabilityNotFound);
// the others are nova-node's.
const (
	// CodeInvalidSwarm: a swarm request or a swarm payload breaks a rule.
	CodeInvalidSwarm = "INVALID_SWARM"
	// CodeSwarmNotFound: no swarm or sub-task with that id here.
	CodeSwarmNotFound = "SWARM_NOT_FOUND"
	// CodeSwarmState: the operation does not fit the swarm's or
	// sub-task's state (already completed, already failed, ...).
	CodeSwarmState = "SWARM_WRONG_STATE"
	// CodeCapabilityNotFound: no agent visible to the creator has a
	// required capability.
	CodeCapabilityNotFound = agentcard.CodeCapabilityNotFound
	// CodeSwarmClosed: the Coordinator or Participant is not running.
	CodeSwarmClosed = "SWARM_CLOSED"
	// CodeBusy: a participant's work queue is full.
	CodeBusy = "BUSY"
	// CodeTaskFailed: a participant's Work failed without a code.
	CodeTaskFailed = "TASK_FAILED"
)

type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }

// Code returns the error's code.
func (e *codedError) Code() string { return e.code }

// Sentinels, matched with errors.Is by the typed errors of the same code.
var (
	// ErrInvalid is matched by every [*InvalidError].
	ErrInvalid error = &codedError{CodeInvalidSwarm, "swarm: invalid"}
	// ErrNotFound is matched by every [*NotFoundError].
	ErrNotFound error = &codedError{CodeSwarmNotFound, "swarm: not found"}
	// ErrWrongState is matched by every [*StateError].
	ErrWrongState error = &codedError{CodeSwarmState, "swarm: wrong state"}
	// ErrClosed is returned when the Coordinator or Participant is not
	// running: call Start first; a closed one cannot be reused.
	ErrClosed error = &codedError{CodeSwarmClosed, "swarm: not running (call Start; a closed coordinator or participant cannot be reused)"}
)

// InvalidError reports a bad argument or payload. Field names it.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "swarm: invalid: " + e.Reason
	}
	return "swarm: invalid " + e.Field + ": " + e.Reason
}

// Code returns [CodeInvalidSwarm].
func (e *InvalidError) Code() string { return CodeInvalidSwarm }

// Is reports whether target is [ErrInvalid].
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// NotFoundError reports an unknown swarm or sub-task. Its message names no
// API, as it reaches the users of programs built on this package (the CLI
// shows it): [Coordinator.List] lists the swarms there are, and
// [Coordinator.Get] a swarm's sub-tasks; ids are case-sensitive.
type NotFoundError struct {
	SwarmID   string
	SubTaskID string // empty when the swarm itself is unknown
}

func (e *NotFoundError) Error() string {
	if e.SubTaskID != "" {
		return "swarm: swarm " + wirecodec.Quote(e.SwarmID) + " has no sub-task " + wirecodec.Quote(e.SubTaskID) + " (ids are case-sensitive)"
	}
	return "swarm: no swarm " + wirecodec.Quote(e.SwarmID) + " on this coordinator (ids are case-sensitive)"
}

// Code returns [CodeSwarmNotFound].
func (e *NotFoundError) Code() string { return CodeSwarmNotFound }

// Is reports whether target is [ErrNotFound].
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// StateError reports an operation that does not fit the current state.
type StateError struct {
	SwarmID   string
	SubTaskID string
	State     string // the swarm's or the sub-task's status
	Hint      string // what to do instead
}

func (e *StateError) Error() string {
	what := "swarm " + wirecodec.Quote(e.SwarmID)
	if e.SubTaskID != "" {
		what = "sub-task " + wirecodec.Quote(e.SubTaskID) + " of " + what
	}
	msg := "swarm: " + what + " is " + e.State
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Code returns [CodeSwarmState].
func (e *StateError) Code() string { return CodeSwarmState }

// Is reports whether target is [ErrWrongState].
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// NoCapableAgentError reports that no agent visible to the creator has any
// of the required capabilities.
type NoCapableAgentError struct {
	Creator      string
	Capabilities []string
}

func (e *NoCapableAgentError) Error() string {
	return "swarm: no agent visible to " + wirecodec.Quote(e.Creator) + " has any of the capabilities [" +
		strings.Join(e.Capabilities, ", ") + "]: register such an agent, or check the sandbox rules"
}

// Code returns [CodeCapabilityNotFound].
func (e *NoCapableAgentError) Code() string { return CodeCapabilityNotFound }

// Is reports whether target is agentcard.ErrCapabilityNotFound.
func (e *NoCapableAgentError) Is(target error) bool { return target == agentcard.ErrCapabilityNotFound }

// codeOf returns err's code or "".
func codeOf(err error) string { return negotiation.CodeOf(err) }
