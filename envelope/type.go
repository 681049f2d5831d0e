package envelope

import "github.com/nova-node/nova-node/internal/wirecodec"

// Type is an envelope's message type. The valid types are the ten constants
// below; anything else fails validation.
type Type string

// The message types of the A2A protocol.
const (
	TypeRequest      Type = "request"
	TypeResponse     Type = "response"
	TypeNotification Type = "notification"
	TypeTaskProposal Type = "task-proposal"
	TypeTaskAccept   Type = "task-accept"
	TypeTaskReject   Type = "task-reject"
	TypeStreamStart  Type = "stream-start"
	TypeStreamData   Type = "stream-data"
	TypeStreamEnd    Type = "stream-end"
	TypeError        Type = "error"
)

// Valid reports whether t is one of the ten message types.
func (t Type) Valid() bool {
	switch t {
	case TypeRequest, TypeResponse, TypeNotification,
		TypeTaskProposal, TypeTaskAccept, TypeTaskReject,
		TypeStreamStart, TypeStreamData, TypeStreamEnd,
		TypeError:
		return true
	}
	return false
}

// Types returns the ten message types in declaration order. The slice is new
// on every call.
func Types() []Type {
	return []Type{
		TypeRequest, TypeResponse, TypeNotification,
		TypeTaskProposal, TypeTaskAccept, TypeTaskReject,
		TypeStreamStart, TypeStreamData, TypeStreamEnd,
		TypeError,
	}
}

// AsksForAnswer reports whether an envelope of type t asks its recipient
// for an answer: a request (answered by a response or an error) or a task
// proposal (answered by an accept or a reject).
func (t Type) AsksForAnswer() bool {
	return t == TypeRequest || t == TypeTaskProposal
}

// CheckBroadcastType refuses, as a broadcast (recipient [Broadcast]), a
// type that asks for an answer ([Type.AsksForAnswer]): nobody can answer
// "*", so its sender would wait for nothing. The error is an
// *[InvalidError] for field "type" (INVALID_ENVELOPE).
func CheckBroadcastType(t Type) error {
	if t.AsksForAnswer() {
		return invalid("type", "a %s asks for an answer, and a broadcast cannot be answered", t)
	}
	return nil
}

// ParseType returns s as a Type, or an *InvalidError for field "type" if s is
// not one of the ten message types. Matching is exact (case-sensitive).
func ParseType(s string) (Type, error) {
	t := Type(s)
	if !t.Valid() {
		return "", invalid("type", "unknown message type %s", wirecodec.Quote(s))
	}
	return t, nil
}
