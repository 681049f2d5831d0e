package delta

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// CodeDeserializationFailed is the seed's code for an update that cannot be
// decoded, carried by *[DeserializationError]. The receiver logs it with the
// source agent and skips the update.
const CodeDeserializationFailed = "CRDT_DESERIALIZATION_FAILED"

// ErrDeserialization is matched (errors.Is) by every *[DeserializationError]:
// bytes that do not decode to a valid delta, document or sync message.
var ErrDeserialization = errors.New("delta: deserialization failed")

// ErrInvalidPath is matched by every *[PathError].
var ErrInvalidPath = errors.New("delta: invalid path")

// ErrInvalidValue is matched by every *[ValueError].
var ErrInvalidValue = errors.New("delta: invalid value")

// ErrInvalidReplica reports a replica or agent ID that is empty, too long,
// not UTF-8 or holds a control character, or a [Doc] that has no replica
// (one not made by [New]) asked to mutate.
var ErrInvalidReplica = errors.New("delta: invalid replica id")

// ErrOverflow reports an update that does not fit: a counter total beyond
// int64, or a replica whose sequence numbers are exhausted.
var ErrOverflow = errors.New("delta: overflow")

// ErrInvalidMessage reports a [SyncMessage] that breaks a rule of
// [SyncMessage.Validate].
var ErrInvalidMessage = errors.New("delta: invalid sync message")

// DeserializationError reports input that is not a valid encoding. What is
// "delta", "doc" or "sync message"; Reason says what is wrong in lower case.
// Its Code is [CodeDeserializationFailed].
type DeserializationError struct {
	What   string
	Reason string

	cause error
}

// Error returns "delta: cannot decode <what>: <reason>".
func (e *DeserializationError) Error() string {
	return "delta: cannot decode " + e.What + ": " + e.Reason
}

// Code returns [CodeDeserializationFailed].
func (e *DeserializationError) Code() string { return CodeDeserializationFailed }

// Is reports whether target is [ErrDeserialization].
func (e *DeserializationError) Is(target error) bool { return target == ErrDeserialization }

// Unwrap returns the decoder or validation error behind e, if any.
func (e *DeserializationError) Unwrap() error { return e.cause }

// maxReasonLen bounds reasons quoting hostile input.
const maxReasonLen = 200

func deserr(what string, cause error, format string, args ...any) *DeserializationError {
	r := fmt.Sprintf(format, args...)
	if cause != nil {
		if r != "" {
			r += ": "
		}
		r += strings.TrimPrefix(cause.Error(), "delta: ")
	}
	return &DeserializationError{What: what, Reason: truncate(r, maxReasonLen), cause: cause}
}

// PathError reports a path that breaks the syntax of the package
// documentation. Path is the offending path, truncated in Error.
type PathError struct {
	Path   string
	Reason string
}

// Error returns "delta: invalid path <path>: <reason>".
func (e *PathError) Error() string {
	return fmt.Sprintf("delta: invalid path %q: %s", truncate(e.Path, 64), e.Reason)
}

// Is reports whether target is [ErrInvalidPath].
func (e *PathError) Is(target error) bool { return target == ErrInvalidPath }

func pathErr(p, format string, args ...any) *PathError {
	return &PathError{Path: p, Reason: fmt.Sprintf(format, args...)}
}

// ValueError reports a JSON value that cannot be stored: malformed, too
// large, too deep, or of the wrong kind for the operation.
type ValueError struct {
	Reason string
}

// Error returns "delta: invalid value: <reason>".
func (e *ValueError) Error() string { return "delta: invalid value: " + e.Reason }

// Is reports whether target is [ErrInvalidValue].
func (e *ValueError) Is(target error) bool { return target == ErrInvalidValue }

func valueErr(format string, args ...any) *ValueError {
	return &ValueError{Reason: truncate(fmt.Sprintf(format, args...), maxReasonLen)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
