package a2ahttp

import (
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
)

// The task lifecycle. A task starts in submitted and moves only along the
// edges below; terminal states (completed, canceled, failed, rejected) have
// no way out. Saving a task in the state it is already in is always allowed
// (new artifacts, a new status message), which is how an agent streams
// progress while working.
//
//	submitted      -> working, input-required, auth-required, completed, failed, canceled, rejected
//	working        -> input-required, auth-required, completed, failed, canceled, rejected
//	input-required -> working, failed, canceled
//	auth-required  -> working, failed, canceled
var transitions = map[a2a.TaskState][]a2a.TaskState{
	a2a.TaskStateSubmitted: {
		a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected,
	},
	a2a.TaskStateWorking: {
		a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected,
	},
	a2a.TaskStateInputRequired: {a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateCanceled},
	a2a.TaskStateAuthRequired:  {a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateCanceled},
	a2a.TaskStateCompleted:     nil,
	a2a.TaskStateCanceled:      nil,
	a2a.TaskStateFailed:        nil,
	a2a.TaskStateRejected:      nil,
}

// KnownState reports whether s is one of the eight task states of the spec.
func KnownState(s a2a.TaskState) bool {
	_, ok := transitions[s]
	return ok
}

// ValidTransition reports whether a task may move from one state to
// another. Staying in the same known state is valid.
func ValidTransition(from, to a2a.TaskState) bool {
	next, ok := transitions[from]
	if !ok || !KnownState(to) {
		return false
	}
	if from == to {
		return true
	}
	for _, s := range next {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError reports a task state change the lifecycle forbids.
type TransitionError struct {
	TaskID   string
	From, To a2a.TaskState
}

func (e *TransitionError) Error() string {
	if e.From == "" {
		return fmt.Sprintf("a2ahttp: task %s cannot start in state %q", e.TaskID, e.To)
	}
	return fmt.Sprintf("a2ahttp: task %s cannot move from %q to %q", e.TaskID, e.From, e.To)
}

// Is makes a TransitionError match a2a.ErrInvalidParams, so a client that
// drives an invalid change gets -32602.
func (e *TransitionError) Is(target error) bool { return target == a2a.ErrInvalidParams }

// checkTransition returns nil when a task may be saved in state to, given
// its stored state from ("" when the task is new).
func checkTransition(id string, from, to a2a.TaskState) error {
	if from == "" {
		if to != a2a.TaskStateSubmitted {
			return &TransitionError{TaskID: id, To: to}
		}
		return nil
	}
	if !ValidTransition(from, to) {
		return &TransitionError{TaskID: id, From: from, To: to}
	}
	return nil
}

// active reports whether a task in state s may still change: the store never
// prunes active tasks.
func active(s a2a.TaskState) bool { return !s.Terminal() }
