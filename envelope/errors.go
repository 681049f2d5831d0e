package envelope

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Error codes carried by the errors of this package. They are the seed's
// codes; at the wire, protocol maps them to and from errors with its own table.
const (
	// CodeSchemaVersionMismatch is the code of *SchemaVersionError.
	CodeSchemaVersionMismatch = "SCHEMA_VERSION_MISMATCH"
	// CodeInvalidEnvelope is the code of *InvalidError.
	CodeInvalidEnvelope = "INVALID_ENVELOPE"
)

// ErrSchemaVersionMismatch is matched (errors.Is) by every *SchemaVersionError:
// an envelope carries a schemaVersion other than [SchemaVersion].
var ErrSchemaVersionMismatch = errors.New("envelope: schema version mismatch")

// ErrInvalid is matched (errors.Is) by every *InvalidError: an envelope breaks
// a validation rule, is too large, or its encoding is malformed.
var ErrInvalid = errors.New("envelope: invalid envelope")

// SchemaVersionError reports an envelope whose schemaVersion is not the one
// this package speaks. Expected is always [SchemaVersion].
type SchemaVersionError struct {
	Expected int
	Actual   int
}

func (e *SchemaVersionError) Error() string {
	return "envelope: schema version mismatch: expected " + strconv.Itoa(e.Expected) +
		", got " + strconv.Itoa(e.Actual)
}

// Code returns [CodeSchemaVersionMismatch].
func (e *SchemaVersionError) Code() string { return CodeSchemaVersionMismatch }

// Is reports whether target is [ErrSchemaVersionMismatch].
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaVersionMismatch }

// InvalidError reports an envelope that breaks a rule. Field is the JSON name
// of the offending field ("sender", "metadata.tier"), or empty when the rule
// concerns the envelope as a whole (its size, its encoding). Reason says what
// is wrong in lower case.
type InvalidError struct {
	Field  string
	Reason string

	cause error // underlying decoder error, if any
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "envelope: invalid envelope: " + e.Reason
	}
	return "envelope: invalid " + e.Field + ": " + e.Reason
}

// Code returns [CodeInvalidEnvelope].
func (e *InvalidError) Code() string { return CodeInvalidEnvelope }

// Is reports whether target is [ErrInvalid].
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the decoder error that caused e, if any.
func (e *InvalidError) Unwrap() error { return e.cause }

// PayloadSizeError measures a payload over [MaxPayloadSize]: it is the
// cause of the *[InvalidError] that refuses it (errors.As finds it). Size
// is the payload's length in bytes, compacted where compaction was needed
// and possible.
type PayloadSizeError struct {
	Size int
	Max  int
}

func (e *PayloadSizeError) Error() string {
	return "envelope: payload of " + strconv.Itoa(e.Size) + " bytes, over the " + strconv.Itoa(e.Max) + "-byte limit"
}

// PayloadDepthError measures a payload nested deeper than
// [MaxPayloadDepth]: it is the cause of the *[InvalidError] that refuses
// it (errors.As finds it). Depth counts the nesting of arrays and objects.
type PayloadDepthError struct {
	Depth int
	Max   int
}

func (e *PayloadDepthError) Error() string {
	return "envelope: payload nested " + strconv.Itoa(e.Depth) + " levels deep, over the limit of " + strconv.Itoa(e.Max)
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// malformed wraps a decoder error. The reason is truncated: decoder messages
// may quote attacker-controlled input.
func malformed(field, what string, err error) *InvalidError {
	return &InvalidError{Field: field, Reason: what + ": " + wirecodec.Truncate(err.Error(), maxReasonLen), cause: err}
}

const (
	maxReasonLen = 200 // bytes of a foreign error message kept in a Reason
)
