package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/nova-node/nova-node/internal/jsonstr"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// The JSON encoding is written by hand, so that its exact length is known
// before encoding (see jsonLen) and no reflection runs. Its output is what
// encoding/json produces for an Envelope with HTML escaping off: the same
// field order, the same string escapes, the compact payload verbatim.
const (
	jsonKeyID            = `{"id":`
	jsonKeySchemaVersion = `,"schemaVersion":`
	jsonKeySender        = `,"sender":`
	jsonKeyRecipient     = `,"recipient":`
	jsonKeyCorrelationID = `,"correlationId":`
	jsonKeyType          = `,"type":`
	jsonKeyTimestamp     = `,"timestamp":`
	jsonKeyPayload       = `,"payload":`
	jsonKeyMetadataTier  = `,"metadata":{"tier":`
	jsonKeySandboxID     = `,"sandboxId":`
	jsonKeyRoutingHint   = `,"routingHint":`
	jsonKeyJustification = `,"escalationJustification":`
)

// maxJSONDepth bounds the nesting of a JSON envelope: the envelope object
// around a payload of MaxPayloadDepth. It is checked before decoding.
const maxJSONDepth = MaxPayloadDepth + 1

// maxJSONMembers bounds the members of a JSON object in an envelope (known
// and unknown fields), like DecOptions.MaxMapPairs does for CBOR.
const maxJSONMembers = 4096

// EncodeJSON validates e and returns its JSON encoding: one compact object
// with the fields' JSON names, the payload inline. An empty payload is
// written as null, a payload that is not compact is compacted.
func EncodeJSON(e *Envelope) ([]byte, error) {
	c, err := e.check()
	if err != nil {
		return nil, err
	}
	p := wirePayload(e.Payload, c.compact)
	b := appendJSON(make([]byte, 0, jsonLen(e, len(p))), e, p)
	if len(b) > MaxEncodedSize { // not reached: check bounds the length
		return nil, tooLarge(len(b))
	}
	return b, nil
}

// DecodeJSON decodes one JSON envelope. In order, it rejects input larger
// than MaxEncodedSize, input nested deeper than the payload allows, input
// that is not UTF-8 or not one JSON value; then it reads the object (keys
// must be unique and match the JSON names exactly; unknown keys are
// ignored), returns a *SchemaVersionError if schemaVersion is not
// [SchemaVersion], compacts the payload and validates the result. The
// returned Payload is never nil and never shares memory with b.
func DecodeJSON(b []byte) (*Envelope, error) {
	if len(b) > MaxEncodedSize {
		return nil, tooLarge(len(b))
	}
	if d, _ := wirecodec.ScanJSON(b, maxJSONDepth); d > maxJSONDepth {
		return nil, invalid("", "json nested deeper than %d levels", maxJSONDepth)
	}
	if !utf8.Valid(b) {
		return nil, invalid("", "json is not valid utf-8")
	}
	if !json.Valid(b) {
		var v struct{}
		err := json.Unmarshal(b, &v) // for the syntax error's detail
		if err == nil {
			err = errors.New("invalid json") // not reached
		}
		return nil, malformed("", "malformed json", err)
	}

	// b is one valid JSON value from here on.
	var (
		e        Envelope
		version  *int
		fieldErr error // the first member with a value of the wrong type
	)
	note := func(err error) {
		if fieldErr == nil {
			fieldErr = err
		}
	}
	err := jsonMembers(b, "", func(key string, val []byte) {
		var err error
		switch key {
		case "id":
			e.ID, err = jsonString(key, val)
		case "schemaVersion":
			var v int64
			var ok bool
			if v, ok, err = jsonInt(key, val, strconv.IntSize); ok {
				n := int(v)
				version = &n
			}
		case "sender":
			e.Sender, err = jsonString(key, val)
		case "recipient":
			e.Recipient, err = jsonString(key, val)
		case "correlationId":
			e.CorrelationID, err = jsonString(key, val)
		case "type":
			var t string
			t, err = jsonString(key, val)
			e.Type = Type(t)
		case "timestamp":
			e.Timestamp, _, err = jsonInt(key, val, 64)
		case "payload":
			if string(val) != "null" {
				e.Payload = bytes.Clone(val) // do not alias b
			}
		case "metadata":
			e.Metadata, err = decodeMetadataJSON(val)
		}
		if err != nil {
			note(err)
		}
	})
	if version != nil && *version != SchemaVersion {
		return nil, &SchemaVersionError{Expected: SchemaVersion, Actual: *version}
	}
	if err != nil {
		return nil, err
	}
	if fieldErr != nil {
		return nil, fieldErr
	}
	if version == nil {
		return nil, invalid("schemaVersion", "missing")
	}
	e.SchemaVersion = *version
	// The payload is a member of b, which passed the UTF-8, depth and
	// syntax checks above.
	p, err := normalizeValidPayload(e.Payload)
	if err != nil {
		return nil, err
	}
	e.Payload = p
	return finishDecode(&e)
}

// decodeMetadataJSON decodes the metadata member's value.
func decodeMetadataJSON(val []byte) (*Metadata, error) {
	if string(val) == "null" {
		return nil, nil
	}
	var (
		m        Metadata
		haveTier bool
		fieldErr error
	)
	err := jsonMembers(val, "metadata", func(key string, val []byte) {
		var err error
		switch key {
		case "tier":
			var v int64
			if v, haveTier, err = jsonUint8("metadata.tier", val); haveTier {
				m.Tier = uint8(v)
			}
		case "sandboxId":
			m.SandboxID, err = jsonString("metadata."+key, val)
		case "routingHint":
			m.RoutingHint, err = jsonString("metadata."+key, val)
		case "escalationJustification":
			m.EscalationJustification, err = jsonString("metadata."+key, val)
		}
		if err != nil && fieldErr == nil {
			fieldErr = err
		}
	})
	if err != nil {
		return nil, err
	}
	if fieldErr != nil {
		return nil, fieldErr
	}
	if !haveTier {
		return nil, invalid("metadata.tier", "missing")
	}
	return &m, nil
}

// The functions below read JSON text that json.Valid has accepted as a
// whole, so they only find boundaries; they never need to report syntax.

// jsonMembers calls member for each key and value of the object b, which
// is valid JSON. It fails if b is not an object, if a key repeats (compared
// after unescaping) or if there are more than maxJSONMembers members.
func jsonMembers(b []byte, field string, member func(key string, val []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		if field == "" {
			return invalid("", "not a json object")
		}
		return invalid(field, "must be an object or null")
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return nil
	}
	seen := make(map[string]struct{}, 10)
	for {
		end := skipString(b, i)
		key, err := jsonString(field, b[i:end])
		if err != nil {
			return err // not reached: a valid key unquotes
		}
		if _, dup := seen[key]; dup {
			return invalid(field, "duplicate key %s", wirecodec.Quote(key))
		}
		if len(seen) >= maxJSONMembers {
			return invalid(field, "more than %d members", maxJSONMembers)
		}
		seen[key] = struct{}{}
		i = skipSpace(b, end) // at ':'
		i = skipSpace(b, i+1) // at the value
		end = skipValue(b, i)
		member(key, b[i:end])
		i = skipSpace(b, end) // at ',' or '}'
		if b[i] == '}' {
			return nil
		}
		i = skipSpace(b, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' &&
			b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}

// jsonKind names the kind of a JSON value for error messages.
func jsonKind(val []byte) string {
	switch val[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// jsonString reads a string value; null reads as "".
func jsonString(field string, val []byte) (string, error) {
	switch val[0] {
	case 'n':
		return "", nil
	case '"':
	default:
		return "", invalid(field, "must be a string, got %s", jsonKind(val))
	}
	if bytes.IndexByte(val, '\\') < 0 {
		return string(val[1 : len(val)-1]), nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return "", malformed(field, "bad string", err) // not reached
	}
	return s, nil
}

// jsonInt reads an integer value that fits in bits; ok is false for null.
func jsonInt(field string, val []byte, bits int) (n int64, ok bool, err error) {
	if val[0] == 'n' {
		return 0, false, nil
	}
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return 0, false, invalid(field, "must be an integer, got %s", jsonKind(val))
	}
	n, err = strconv.ParseInt(string(val), 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, false, invalid(field, "%s overflows a %d-bit integer", wirecodec.Quote(string(val)), bits)
		}
		return 0, false, invalid(field, "must be an integer, got %s", wirecodec.Quote(string(val)))
	}
	return n, true, nil
}

// jsonUint8 reads an integer value from 0 to 255; ok is false for null.
func jsonUint8(field string, val []byte) (n int64, ok bool, err error) {
	n, ok, err = jsonInt(field, val, 64)
	if err == nil && ok && (n < 0 || n > 255) {
		return 0, false, invalid(field, "%d is out of range 0..3", n)
	}
	return n, ok, err
}

// appendJSON appends the JSON encoding of e, with payload p (compact JSON).
func appendJSON(dst []byte, e *Envelope, p []byte) []byte {
	dst = append(dst, jsonKeyID...)
	dst = appendJSONString(dst, e.ID)
	dst = append(dst, jsonKeySchemaVersion...)
	dst = strconv.AppendInt(dst, int64(e.SchemaVersion), 10)
	dst = append(dst, jsonKeySender...)
	dst = appendJSONString(dst, e.Sender)
	dst = append(dst, jsonKeyRecipient...)
	dst = appendJSONString(dst, e.Recipient)
	if e.CorrelationID != "" {
		dst = append(dst, jsonKeyCorrelationID...)
		dst = appendJSONString(dst, e.CorrelationID)
	}
	dst = append(dst, jsonKeyType...)
	dst = appendJSONString(dst, string(e.Type))
	dst = append(dst, jsonKeyTimestamp...)
	dst = strconv.AppendInt(dst, e.Timestamp, 10)
	dst = append(dst, jsonKeyPayload...)
	dst = append(dst, p...)
	if m := e.Metadata; m != nil {
		dst = append(dst, jsonKeyMetadataTier...)
		dst = strconv.AppendUint(dst, uint64(m.Tier), 10)
		if m.SandboxID != "" {
			dst = append(dst, jsonKeySandboxID...)
			dst = appendJSONString(dst, m.SandboxID)
		}
		if m.RoutingHint != "" {
			dst = append(dst, jsonKeyRoutingHint...)
			dst = appendJSONString(dst, m.RoutingHint)
		}
		if m.EscalationJustification != "" {
			dst = append(dst, jsonKeyJustification...)
			dst = appendJSONString(dst, m.EscalationJustification)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// jsonLen returns len(appendJSON(nil, e, p)) for any p of length payloadLen.
func jsonLen(e *Envelope, payloadLen int) int {
	n := len(jsonKeyID) + jsonStringLen(e.ID) +
		len(jsonKeySchemaVersion) + intLen(int64(e.SchemaVersion)) +
		len(jsonKeySender) + jsonStringLen(e.Sender) +
		len(jsonKeyRecipient) + jsonStringLen(e.Recipient)
	if e.CorrelationID != "" {
		n += len(jsonKeyCorrelationID) + jsonStringLen(e.CorrelationID)
	}
	n += len(jsonKeyType) + jsonStringLen(string(e.Type)) +
		len(jsonKeyTimestamp) + intLen(e.Timestamp) +
		len(jsonKeyPayload) + payloadLen
	if m := e.Metadata; m != nil {
		n += len(jsonKeyMetadataTier) + intLen(int64(m.Tier))
		if m.SandboxID != "" {
			n += len(jsonKeySandboxID) + jsonStringLen(m.SandboxID)
		}
		if m.RoutingHint != "" {
			n += len(jsonKeyRoutingHint) + jsonStringLen(m.RoutingHint)
		}
		if m.EscalationJustification != "" {
			n += len(jsonKeyJustification) + jsonStringLen(m.EscalationJustification)
		}
		n++ // '}'
	}
	return n + 1 // '}'
}

func intLen(v int64) int {
	var buf [20]byte
	return len(strconv.AppendInt(buf[:0], v, 10))
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does with HTML escaping off.
func appendJSONString(dst []byte, s string) []byte { return jsonstr.Append(dst, s, false) }

// jsonStringLen returns len(appendJSONString(nil, s)).
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				n++
			case c == '"', c == '\\', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
