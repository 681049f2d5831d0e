package envelope

import (
	"bytes"
	"encoding/json"
)

// SchemaVersion is the envelope format version this package writes and the
// only one it accepts.
const SchemaVersion = 1

// Broadcast is the recipient that addresses every agent.
const Broadcast = "*"

// RoutingHintCapability in [Metadata.RoutingHint] says that the recipient is
// a capability ID rather than an agent.
const RoutingHintCapability = "capability"

// Limits enforced by [Envelope.Validate] and the decoders. Lengths are in
// bytes of UTF-8.
const (
	MaxIDLen            = 128          // id and correlationId
	MaxAgentLen         = 256          // sender and recipient, which may be "name@peerID"
	MaxJustificationLen = 4096         // metadata.escalationJustification
	MaxSandboxLen       = 128          // metadata.sandboxId
	MaxPayloadSize      = 1<<20 - 4096 // compact JSON payload
	MaxEncodedSize      = 1 << 20      // an encoded envelope, in either codec
	MaxPayloadDepth     = 64           // nesting of arrays and objects in the payload
)

// Metadata is routing information the sender attaches to an envelope.
type Metadata struct {
	// Tier is the sender's tier, 0 to 3. The tiers package owns what tiers
	// mean; this package only checks the range. Required on the wire.
	Tier uint8 `json:"tier" cbor:"tier"`
	// SandboxID is the sender's sandbox, or empty.
	SandboxID string `json:"sandboxId,omitempty" cbor:"sandboxId,omitempty"`
	// RoutingHint is empty or [RoutingHintCapability].
	RoutingHint string `json:"routingHint,omitempty" cbor:"routingHint,omitempty"`
	// EscalationJustification explains a message from a lower tier to a
	// higher one (L2/L3 to L0/L1), or is empty.
	EscalationJustification string `json:"escalationJustification,omitempty" cbor:"escalationJustification,omitempty"`
}

// Envelope is the wrapper of every agent-to-agent message.
//
// An Envelope is a plain value: nothing in this package mutates one after
// creating it, and callers that share an envelope between goroutines should
// treat it as immutable (use [Envelope.Clone] to get a copy to modify).
type Envelope struct {
	// ID identifies the message; unique per sender. Printable ASCII.
	ID string `json:"id" cbor:"id"`
	// SchemaVersion is the format version; always [SchemaVersion].
	SchemaVersion int `json:"schemaVersion" cbor:"schemaVersion"`
	// Sender is the sending agent ("name" or "name@peerID").
	Sender string `json:"sender" cbor:"sender"`
	// Recipient is the receiving agent, a capability ID (with
	// [RoutingHintCapability]) or [Broadcast].
	Recipient string `json:"recipient" cbor:"recipient"`
	// CorrelationID names the thread the message belongs to, or is empty
	// for a message that starts a thread (see [Envelope.ThreadID]).
	CorrelationID string `json:"correlationId,omitempty" cbor:"correlationId,omitempty"`
	// Type is the message type.
	Type Type `json:"type" cbor:"type"`
	// Timestamp is the creation time in Unix milliseconds; positive.
	Timestamp int64 `json:"timestamp" cbor:"timestamp"`
	// Payload is any JSON value. Nil or empty means null. Factories and
	// decoders store it compact; encoders compact it if it is not.
	Payload json.RawMessage `json:"payload" cbor:"payload"`
	// Metadata is optional routing information.
	Metadata *Metadata `json:"metadata,omitempty" cbor:"metadata,omitempty"`
}

// Clone returns a deep copy of e (nil for nil).
func (e *Envelope) Clone() *Envelope {
	if e == nil {
		return nil
	}
	c := *e
	if e.Payload != nil {
		c.Payload = bytes.Clone(e.Payload)
	}
	if e.Metadata != nil {
		m := *e.Metadata
		c.Metadata = &m
	}
	return &c
}

// ThreadID returns the thread e belongs to: its CorrelationID if set,
// otherwise its own ID (e starts the thread). It returns "" for nil.
func (e *Envelope) ThreadID() string {
	if e == nil {
		return ""
	}
	if e.CorrelationID != "" {
		return e.CorrelationID
	}
	return e.ID
}
