package envelope

import (
	"bytes"
	"encoding/json"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Validate reports whether e follows the envelope rules, returning nil or
// the first broken rule:
//
//   - schemaVersion is [SchemaVersion] (else a *SchemaVersionError; this is
//     checked first);
//   - id is 1 to [MaxIDLen] bytes of printable ASCII without spaces
//     (0x21 to 0x7E); so is correlationId when set;
//   - sender and recipient are 1 to [MaxAgentLen] bytes of UTF-8 without
//     control characters; recipient may be [Broadcast];
//   - type is one of the ten message types;
//   - timestamp is positive;
//   - payload is nil, empty (both meaning null) or valid UTF-8 JSON of at
//     most [MaxPayloadSize] bytes, nested at most [MaxPayloadDepth] deep;
//   - metadata, when present, has a tier from 0 to 3, a routingHint that is
//     empty or [RoutingHintCapability], a sandboxId of at most
//     [MaxSandboxLen] bytes without control characters, and an
//     escalationJustification of at most [MaxJustificationLen] bytes of UTF-8
//     without control characters other than tab, newline and carriage return;
//   - the encoded envelope fits [MaxEncodedSize] bytes in both codecs.
//
// Every other error is an *InvalidError naming the field by its JSON name.
func (e *Envelope) Validate() error {
	_, err := e.check()
	return err
}

// ValidateHeader is [Envelope.Validate] without the payload's rules: it
// checks every header field (schemaVersion first, as Validate does),
// metadata and the encoded size, and trusts the payload.
//
// It is for a caller that already knows the payload is valid, so as not to
// scan it again on every hop: the payload must have passed Validate,
// [Envelope.Normalize] or a decoder ([DecodeCBOR], [DecodeJSON]), or come
// from a [Factory], and must not have changed since. Header fields and
// metadata may have changed: they are all checked. On an envelope whose
// payload is unchecked (decoded by other means, built from user input) use
// Validate: ValidateHeader would let an invalid payload through.
func (e *Envelope) ValidateHeader() error {
	_, err := e.checkAll(true)
	return err
}

// Normalize validates e like [Envelope.Validate] and, if e is valid, puts
// its payload in the form decoders return: compact JSON, with "null" for
// a nil or empty payload. It replaces e.Payload with a new slice when that
// form differs and never writes to the old one. On error e is unchanged.
//
// A normalized envelope can be sent with [EncodeCBORValidated] and checked
// again with [Envelope.ValidateHeader] as long as its payload is not
// changed.
func (e *Envelope) Normalize() error {
	c, err := e.check()
	if err != nil {
		return err
	}
	switch {
	case len(e.Payload) == 0:
		e.Payload = json.RawMessage(bytes.Clone(jsonNull))
	case !c.compact:
		e.Payload = compactJSON(e.Payload)
	}
	return nil
}

func (e *Envelope) check() (checked, error) { return e.checkAll(false) }

// checked is what check learns about a valid envelope.
type checked struct {
	compact bool // the payload is compact (or empty)
}

// checkAll is check; payloadDone says the payload is known to be valid and
// compact (decoders, the Factory, ValidateHeader's callers), so its rules
// are not checked again.
func (e *Envelope) checkAll(payloadDone bool) (checked, error) {
	if e == nil {
		return checked{}, invalid("", "nil envelope")
	}
	if e.SchemaVersion != SchemaVersion {
		return checked{}, &SchemaVersionError{Expected: SchemaVersion, Actual: e.SchemaVersion}
	}
	if err := checkID("id", e.ID); err != nil {
		return checked{}, err
	}
	if err := checkText("sender", e.Sender, MaxAgentLen, false, false); err != nil {
		return checked{}, err
	}
	if err := checkText("recipient", e.Recipient, MaxAgentLen, false, false); err != nil {
		return checked{}, err
	}
	if e.CorrelationID != "" {
		if err := checkID("correlationId", e.CorrelationID); err != nil {
			return checked{}, err
		}
	}
	if !e.Type.Valid() {
		return checked{}, invalid("type", "unknown message type %s", wirecodec.Quote(string(e.Type)))
	}
	if e.Timestamp <= 0 {
		return checked{}, invalid("timestamp", "must be positive, got %d", e.Timestamp)
	}
	compact := true
	if !payloadDone {
		var err error
		if compact, err = checkPayload(e.Payload); err != nil {
			return checked{}, err
		}
	}
	if m := e.Metadata; m != nil {
		if m.Tier > 3 {
			return checked{}, invalid("metadata.tier", "%d is out of range 0..3", m.Tier)
		}
		if err := checkText("metadata.sandboxId", m.SandboxID, MaxSandboxLen, true, false); err != nil {
			return checked{}, err
		}
		if m.RoutingHint != "" && m.RoutingHint != RoutingHintCapability {
			return checked{}, invalid("metadata.routingHint", "must be empty or %q, got %s",
				RoutingHintCapability, wirecodec.Quote(m.RoutingHint))
		}
		if err := checkText("metadata.escalationJustification", m.EscalationJustification,
			MaxJustificationLen, true, true); err != nil {
			return checked{}, err
		}
	}
	// The JSON encoding is the larger of the two (see doc.go), so this bound
	// covers CBOR too. The exact length costs a pass over every string;
	// a cheap upper bound settles all but envelopes near the limit.
	payloadLen := len(e.Payload)
	if payloadLen == 0 {
		payloadLen = len(jsonNull)
	}
	if jsonLenBound(e, payloadLen) > MaxEncodedSize {
		if n := jsonLen(e, payloadLen); n > MaxEncodedSize {
			return checked{}, invalid("", "encoded size of %d bytes is over the %d-byte limit", n, MaxEncodedSize)
		}
	}
	return checked{compact: compact}, nil
}

// jsonLenBound is an upper bound of jsonLen(e, payloadLen): encoding/json
// writes at most six bytes (\u00XX, \ufffd) for a byte of a string, and
// the keys, quotes and numbers take less than jsonFixedLen.
func jsonLenBound(e *Envelope, payloadLen int) int {
	n := len(e.ID) + len(e.Sender) + len(e.Recipient) + len(e.CorrelationID) + len(e.Type)
	if m := e.Metadata; m != nil {
		n += len(m.SandboxID) + len(m.RoutingHint) + len(m.EscalationJustification)
	}
	return payloadLen + 6*n + jsonFixedLen
}

// jsonFixedLen bounds what an envelope's JSON encoding holds besides its
// strings' contents and the payload: every key (under 200 bytes), two
// quotes for each of the eight strings and three numbers of at most 20
// bytes each.
const jsonFixedLen = 512

// checkID checks an identifier: 1 to MaxIDLen bytes of 0x21..0x7E.
func checkID(field, s string) error {
	if err := CheckID(s, MaxIDLen); err != nil {
		return &InvalidError{Field: field, Reason: err.Error()}
	}
	return nil
}

// checkText checks a UTF-8 string of at most limit bytes without control
// characters (newlines allows tab, newline and carriage return).
func checkText(field, s string, limit int, allowEmpty, newlines bool) error {
	if s == "" && !allowEmpty {
		return invalid(field, "must not be empty")
	}
	if err := CheckText(s, limit, newlines); err != nil {
		return &InvalidError{Field: field, Reason: err.Error()}
	}
	return nil
}
