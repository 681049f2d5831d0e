package delta

import (
	"fmt"
	"maps"
)

// MaxClockEntries is the most replicas a sync message's vector clock may
// name.
const MaxClockEntries = 1 << 16

// SyncMessage is the seed's CRDTSyncMessage: one update on its way to
// every replica of a document. The CBOR keys are the seed's JSON names.
type SyncMessage struct {
	// SourceAgentID is the agent that made the update; receivers log it
	// with any error the update causes.
	SourceAgentID string `cbor:"sourceAgentId"`
	// VectorClock is the sender's clock after joining the update
	// ([Doc.Clock]): never empty, every count at least 1. It covers the
	// dots the payload mints, and tells a receiver, through [Doc.Ready],
	// whether it missed updates the payload depends on.
	VectorClock VersionVector `cbor:"vectorClock"`
	// Payload is the update: a delta encoded by [EncodeDelta].
	Payload []byte `cbor:"payload"`
	// Timestamp is the sender's time in Unix milliseconds, > 0. It is
	// informational: ordering comes from the clock, never from it.
	Timestamp int64 `cbor:"timestamp"`
}

// NewSyncMessage builds the message that carries x from agent source. clock
// is the sender's clock after joining x, which must cover the dots x mints
// (join x first, then call Clock).
func NewSyncMessage(source string, clock VersionVector, x *Delta, timestamp int64) (*SyncMessage, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: no delta", ErrInvalidMessage)
	}
	if !spansAllIn(&x.minted, clock.Context()) {
		return nil, fmt.Errorf("%w: vectorClock does not cover the delta's dots (join the delta first)", ErrInvalidMessage)
	}
	p, err := EncodeDelta(x)
	if err != nil {
		return nil, err
	}
	m := &SyncMessage{SourceAgentID: source, VectorClock: clock.Clone(), Payload: p, Timestamp: timestamp}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks m: a valid source agent ID (1..MaxIDLen bytes of UTF-8,
// no control characters); a vector clock that is not empty, names at most
// MaxClockEntries valid replica IDs and counts at least 1 for each; a
// non-empty payload; a positive timestamp. Errors match
// [ErrInvalidMessage].
func (m *SyncMessage) Validate() error {
	if checkID(m.SourceAgentID) != nil {
		return fmt.Errorf("%w: invalid sourceAgentId", ErrInvalidMessage)
	}
	if len(m.VectorClock) == 0 {
		return fmt.Errorf("%w: vectorClock is empty", ErrInvalidMessage)
	}
	if len(m.VectorClock) > MaxClockEntries {
		return fmt.Errorf("%w: vectorClock names more than %d replicas", ErrInvalidMessage, MaxClockEntries)
	}
	for r, n := range m.VectorClock {
		if checkID(r) != nil {
			return fmt.Errorf("%w: invalid replica in vectorClock", ErrInvalidMessage)
		}
		if n == 0 {
			return fmt.Errorf("%w: vectorClock counts 0 for a replica", ErrInvalidMessage)
		}
	}
	if len(m.Payload) == 0 {
		return fmt.Errorf("%w: payload is empty", ErrInvalidMessage)
	}
	if m.Timestamp <= 0 {
		return fmt.Errorf("%w: timestamp must be positive", ErrInvalidMessage)
	}
	return nil
}

// Delta decodes m's payload and checks that m's vector clock covers the
// dots it mints. Errors are *[DeserializationError].
func (m *SyncMessage) Delta() (*Delta, error) {
	x, err := DecodeDelta(m.Payload)
	if err != nil {
		return nil, err
	}
	if !spansAllIn(&x.minted, m.VectorClock.Context()) {
		return nil, deserr("sync message", nil, "vectorClock does not cover the payload's dots")
	}
	return x, nil
}

// Equal reports whether m and o have the same fields.
func (m *SyncMessage) Equal(o *SyncMessage) bool {
	return m.SourceAgentID == o.SourceAgentID && maps.Equal(m.VectorClock, o.VectorClock) &&
		string(m.Payload) == string(o.Payload) && m.Timestamp == o.Timestamp
}

// EncodeSyncMessage validates m and returns its deterministic CBOR
// encoding: a map with the keys sourceAgentId, vectorClock (a map from
// replica to count), payload (a byte string) and timestamp.
func EncodeSyncMessage(m *SyncMessage) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := encMode.Marshal(m)
	if err != nil { // not reached: every field encodes
		return nil, err
	}
	if len(b) > MaxEncodedSize {
		return nil, ErrTooLarge
	}
	return b, nil
}

// DecodeSyncMessage decodes and validates one message, with the size cap
// and decoder limits of [DecodeDelta]. Unknown keys are ignored. It does
// not decode the payload: [SyncMessage.Delta] does. Errors are
// *[DeserializationError] (code CRDT_DESERIALIZATION_FAILED), which also
// match ErrInvalidMessage when the message broke a rule of Validate.
func DecodeSyncMessage(b []byte) (*SyncMessage, error) {
	const what = "sync message"
	if len(b) > MaxEncodedSize {
		return nil, deserr(what, nil, "%d bytes, over the %d-byte limit", len(b), MaxEncodedSize)
	}
	var m SyncMessage
	if err := decMode.Unmarshal(b, &m); err != nil {
		return nil, deserr(what, err, "malformed cbor")
	}
	if err := m.Validate(); err != nil {
		return nil, deserr(what, err, "")
	}
	return &m, nil
}
