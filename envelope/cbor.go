package envelope

import (
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// decLimits are the structure limits of the envelope decoder. The
// envelope itself nests two levels (envelope, metadata); the rest is room
// for unknown fields from later minor revisions, which are ignored.
var decLimits = wirecodec.Limits{
	MaxNestedLevels:  16,
	MaxArrayElements: 4096,
	MaxMapPairs:      4096,
}

var encMode, decMode = wirecodec.EncMode(), wirecodec.NewDecMode(decLimits)

// EncMode returns the CBOR encoding mode of envelopes: RFC 8949 core
// deterministic encoding (cbor.CoreDetEncOptions), so equal envelopes encode
// to equal bytes. Protocol framing shares it.
func EncMode() cbor.EncMode { return encMode }

// DecMode returns the CBOR decoding mode for untrusted input: the hardened
// decoder shared by every decoder of peer input (see internal/wirecodec),
// with at most 16 nested levels, 4096 array elements and 4096 map pairs.
// Duplicate map keys, indefinite lengths and tags (anywhere in the input)
// are errors, as are invalid UTF-8 in a text string and a byte string
// decoded into a Go string; struct field names match exactly; unknown
// fields are ignored. It does not limit the input size: callers must,
// before decoding ([DecodeCBOR] does).
func DecMode() cbor.DecMode { return decMode }

// wireEnvelope is what DecodeCBOR reads: pointers tell a missing
// schemaVersion or tier from a zero one. The keys are Envelope's.
type wireEnvelope struct {
	ID            string        `cbor:"id"`
	SchemaVersion *int          `cbor:"schemaVersion"`
	Sender        string        `cbor:"sender"`
	Recipient     string        `cbor:"recipient"`
	CorrelationID string        `cbor:"correlationId"`
	Type          string        `cbor:"type"`
	Timestamp     int64         `cbor:"timestamp"`
	Payload       []byte        `cbor:"payload"`
	Metadata      *wireMetadata `cbor:"metadata"`
}

type wireMetadata struct {
	Tier                    *uint8 `cbor:"tier"`
	SandboxID               string `cbor:"sandboxId"`
	RoutingHint             string `cbor:"routingHint"`
	EscalationJustification string `cbor:"escalationJustification"`
}

// EncodeCBOR validates e and returns its CBOR encoding: a map keyed by the
// JSON field names, in core deterministic order, with the payload as a byte
// string holding compact JSON (null for an empty payload).
func EncodeCBOR(e *Envelope) ([]byte, error) {
	c, err := e.check()
	if err != nil {
		return nil, err
	}
	return encodeCBOR(e, c.compact)
}

// encodeCBOR encodes a checked envelope whose payload is compact or not,
// with the canonical encoder (the reflective encoder's bytes, in one
// allocation of the exact size).
func encodeCBOR(e *Envelope, compact bool) ([]byte, error) {
	p := wirePayload(e.Payload, compact)
	n := canonicalLen(e, p)
	if n > MaxEncodedSize { // not reached: check bounds the JSON size, which is larger
		return nil, tooLarge(n)
	}
	return appendCanonical(make([]byte, 0, n), e, p), nil
}

// EncodeCBORValidated is [EncodeCBOR] for an envelope whose payload is
// already known to be valid and compact: it checks only the header
// ([Envelope.ValidateHeader]) and writes the payload as it is (null if
// empty), where EncodeCBOR scans and perhaps compacts it again. For such
// an envelope the output is the bytes EncodeCBOR returns.
//
// The caller guarantees the payload: it came from a [Factory] or a decoder
// ([DecodeCBOR], [DecodeJSON]), or passed [Envelope.Normalize], and has not
// changed since. A payload that is valid but not compact would be sent
// as is, and receivers would decode it compacted, so not equal to what was
// sent; an invalid one would be refused by every receiver. When in doubt,
// use EncodeCBOR.
func EncodeCBORValidated(e *Envelope) ([]byte, error) {
	if _, err := e.checkAll(true); err != nil {
		return nil, err
	}
	return encodeCBOR(e, true)
}

// AppendCBORValidated is [EncodeCBORValidated] appending the encoding to
// dst, whose array it reuses when large enough (a sender that recycles its
// buffers allocates nothing per envelope). On error dst is returned as is.
func AppendCBORValidated(dst []byte, e *Envelope) ([]byte, error) {
	if _, err := e.checkAll(true); err != nil {
		return dst, err
	}
	p := wirePayload(e.Payload, true)
	n := canonicalLen(e, p)
	if n > MaxEncodedSize { // not reached: check bounds the JSON size, which is larger
		return dst, tooLarge(n)
	}
	return appendCanonical(slices.Grow(dst, n), e, p), nil
}

// DecodeCBOR decodes one CBOR envelope. In order, it rejects input larger
// than MaxEncodedSize, decodes with [DecMode] (the whole input must be one
// data item), returns a *SchemaVersionError if schemaVersion is not
// [SchemaVersion], compacts the payload and validates the result. The
// returned Payload is never nil.
func DecodeCBOR(b []byte) (*Envelope, error) {
	if len(b) > MaxEncodedSize {
		return nil, tooLarge(len(b))
	}
	// What nova nodes send, read without reflection (cbor_fast.go); any
	// other input takes the strict path below, which decides every error.
	fast := new(cborDecoding)
	if n, ok := decodeCanonical(b, fast); ok && n == len(b) {
		return fast.finish()
	}
	return decodeCBORStrict(b)
}

// decodeCBORStrict is DecodeCBOR without the canonical fast path: the
// reflective decoder with every limit, and the reference the fast path is
// fuzzed against.
func decodeCBORStrict(b []byte) (*Envelope, error) {
	// One allocation holds the wire form, the version it points to and the
	// result with its metadata. The version starts at noVersion: the
	// decoder writes through a non-nil pointer and leaves it alone when
	// the key is absent, so noVersion means "absent" unless the input
	// really holds that value; decodeCBORFallback tells which.
	d := new(cborDecoding)
	d.version = noVersion
	d.w.SchemaVersion = &d.version
	w := &d.w
	err := decMode.Unmarshal(b, w)
	if err == nil && w.SchemaVersion != nil && *w.SchemaVersion == noVersion {
		return decodeCBORFallback(b)
	}
	if err != nil || w.SchemaVersion == nil || *w.SchemaVersion != SchemaVersion {
		return nil, cborVersionError(b, w, err)
	}
	return d.finish()
}

// noVersion is the schemaVersion DecodeCBOR presets to detect an absent
// one.
const noVersion = math.MinInt

// cborDecoding is the memory of one DecodeCBOR call.
type cborDecoding struct {
	w       wireEnvelope
	version int
	e       Envelope
	m       Metadata
	wm      wireMetadata // the fast path's metadata (the strict one allocates its own)
	tier    uint8
}

// decodeCBORFallback is DecodeCBOR with a fresh wire form, whose nil
// version pointer tells an absent schemaVersion from any value. It runs
// only for input whose schemaVersion is absent or the value noVersion.
func decodeCBORFallback(b []byte) (*Envelope, error) {
	d := new(cborDecoding)
	w := &d.w
	err := decMode.Unmarshal(b, w)
	if err != nil || w.SchemaVersion == nil || *w.SchemaVersion != SchemaVersion {
		return nil, cborVersionError(b, w, err)
	}
	return d.finish() // not reached: noVersion is not SchemaVersion
}

// cborVersionError returns the error of an input that failed to decode
// (err) or decoded without schemaVersion [SchemaVersion].
func cborVersionError(b []byte, w *wireEnvelope, err error) error {
	// The version decides first: a newer envelope may fail to decode
	// here only because its layout changed.
	v, ok := probeCBORVersion(b)
	if ok && v != SchemaVersion {
		return &SchemaVersionError{Expected: SchemaVersion, Actual: v}
	}
	if err != nil {
		return cborError(err)
	}
	return invalid("schemaVersion", "missing")
}

// finish builds, normalizes and validates the envelope of a decoded wire
// form.
func (d *cborDecoding) finish() (*Envelope, error) {
	w := &d.w
	e := &d.e
	*e = Envelope{
		ID:            w.ID,
		SchemaVersion: *w.SchemaVersion,
		Sender:        w.Sender,
		Recipient:     w.Recipient,
		CorrelationID: w.CorrelationID,
		Type:          Type(w.Type),
		Timestamp:     w.Timestamp,
		Payload:       w.Payload,
	}
	if m := w.Metadata; m != nil {
		if m.Tier == nil {
			return nil, invalid("metadata.tier", "missing")
		}
		d.m = Metadata{
			Tier:                    *m.Tier,
			SandboxID:               m.SandboxID,
			RoutingHint:             m.RoutingHint,
			EscalationJustification: m.EscalationJustification,
		}
		e.Metadata = &d.m
	}
	p, err := normalizePayload(e.Payload)
	if err != nil {
		return nil, err
	}
	e.Payload = p
	return finishDecode(e)
}

// cborError turns a decoding error into an *InvalidError, naming the field
// when the error is a type mismatch in one.
func cborError(err error) *InvalidError {
	te, ok := errors.AsType[*cbor.UnmarshalTypeError](err)
	if !ok {
		return malformed("", "malformed cbor", err)
	}
	field, found := strings.CutPrefix(te.StructFieldName, "envelope.wireEnvelope.")
	if !found {
		if name, ok := strings.CutPrefix(te.StructFieldName, "envelope.wireMetadata."); ok {
			field = "metadata." + name
		} else {
			field = ""
		}
	}
	reason := "cbor " + te.CBORType + " where " + te.GoType + " is expected"
	if strings.Contains(te.Error(), "overflows") {
		reason = "cbor " + te.CBORType + " overflows " + te.GoType
	}
	return &InvalidError{Field: field, Reason: reason, cause: err}
}

// probeCBORVersion reads only schemaVersion from b, ignoring every other
// field whatever its type.
func probeCBORVersion(b []byte) (int, bool) {
	var p struct {
		SchemaVersion *int `cbor:"schemaVersion"`
	}
	if err := decMode.Unmarshal(b, &p); err != nil || p.SchemaVersion == nil {
		return 0, false
	}
	return *p.SchemaVersion, true
}

// finishDecode validates a decoded envelope whose payload has been
// normalized.
func finishDecode(e *Envelope) (*Envelope, error) {
	if _, err := e.checkAll(true); err != nil {
		return nil, err
	}
	return e, nil
}

func tooLarge(n int) *InvalidError {
	return invalid("", "encoded envelope of %d bytes is over the %d-byte limit", n, MaxEncodedSize)
}
