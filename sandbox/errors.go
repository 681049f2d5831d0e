package sandbox

import (
	"errors"
	"fmt"
	"strconv"
)

// CodeSandboxViolation is the seed's error code for a message that crosses a
// sandbox boundary without authorization.
const CodeSandboxViolation = "SANDBOX_VIOLATION"

// ErrSandboxViolation is matched (errors.Is) by every [*ViolationError].
var ErrSandboxViolation = errors.New("sandbox: sandbox violation")

// ViolationError reports a denied reach or discovery.
type ViolationError struct {
	Action   string // ActionReach, ActionDiscover or ActionWrite
	From, To Agent  // for discovery, From is the viewer and To the target; for a write, To is the document
}

func (e *ViolationError) Error() string {
	return "sandbox: sandbox violation: " + e.reason()
}

// reason is the message without the prefix; it is also SecurityEvent.Reason.
func (e *ViolationError) reason() string {
	return fmt.Sprintf("%s may not %s %s: different sandboxes and not on the cross-sandbox allow list",
		e.From, e.Action, e.To)
}

// Code returns [CodeSandboxViolation].
func (e *ViolationError) Code() string { return CodeSandboxViolation }

// Is reports whether target is [ErrSandboxViolation].
func (e *ViolationError) Is(target error) bool { return target == ErrSandboxViolation }

// String describes a for messages: the quoted id and the sandbox, or
// "unsandboxed" for the host's default space.
func (a Agent) String() string {
	if a.Sandbox == "" {
		return strconv.Quote(a.ID) + " (unsandboxed)"
	}
	return strconv.Quote(a.ID) + " (sandbox " + strconv.Quote(a.Sandbox) + ")"
}
