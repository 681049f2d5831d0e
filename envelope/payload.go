package envelope

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

var jsonNull = []byte("null")

// CheckPayload reports whether raw can be an envelope's payload, by the
// rules [Factory] and [Envelope.Normalize] apply: empty (null) or valid
// JSON in UTF-8, nested at most [MaxPayloadDepth] levels, at most
// [MaxPayloadSize] bytes once compacted (the form it travels in). The
// error is the *[InvalidError] those return; a broken size or depth limit
// also matches *[PayloadSizeError] or *[PayloadDepthError] (errors.As),
// which give the measure.
func CheckPayload(raw []byte) error {
	_, err := normalizePayload(raw)
	return err
}

// checkPayload applies the payload rules to p as it is: at most
// MaxPayloadSize bytes, UTF-8, nesting at most MaxPayloadDepth, valid JSON.
// An empty p is null and passes. It reports whether p is compact.
//
// One pass of scanPayload decides valid payloads; only a payload that fails
// it takes the slower three checks, which find the first broken rule.
func checkPayload(p []byte) (compact bool, err error) {
	if len(p) == 0 {
		return true, nil
	}
	if len(p) > MaxPayloadSize {
		return false, payloadTooLarge(len(p))
	}
	if ok, compact := scanPayload(p); ok {
		return compact, nil
	}
	return checkPayloadSlow(p)
}

// checkPayloadSlow is checkPayload by three passes over p (nesting, UTF-8,
// syntax), for a p of at most MaxPayloadSize bytes. It reports the first
// rule p breaks in that order.
func checkPayloadSlow(p []byte) (compact bool, err error) {
	depth, compact := wirecodec.ScanJSON(p, MaxPayloadDepth)
	if depth > MaxPayloadDepth {
		return false, payloadTooDeep(p)
	}
	if !utf8.Valid(p) {
		return false, invalid("payload", "not valid utf-8")
	}
	if !json.Valid(p) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, p); err != nil {
			return false, malformed("payload", "not valid json", err)
		}
		return false, invalid("payload", "not valid json")
	}
	return compact, nil
}

// normalizePayload checks p and returns its compact form: "null" for an
// empty p, p itself if already compact, a new compact copy otherwise. The
// size limit applies to the compact form.
func normalizePayload(p []byte) (json.RawMessage, error) {
	if len(p) == 0 {
		return json.RawMessage(bytes.Clone(jsonNull)), nil
	}
	if len(p) > MaxPayloadSize {
		// The limit is on the compact form: compact first if that can help.
		if ok, compact := scanPayload(p); ok && !compact {
			p = compactJSON(p)
		}
	}
	compact, err := checkPayload(p)
	if err != nil {
		return nil, err
	}
	if compact {
		return p, nil
	}
	return compactJSON(p), nil
}

// normalizeValidPayload is normalizePayload for text already known to be
// valid JSON, UTF-8 and nested at most MaxPayloadDepth deep (a member of an
// envelope that DecodeJSON has checked as a whole): only compaction and the
// size limit remain.
func normalizeValidPayload(p []byte) (json.RawMessage, error) {
	if len(p) == 0 {
		return json.RawMessage(bytes.Clone(jsonNull)), nil
	}
	if _, compact := wirecodec.ScanJSON(p, MaxPayloadDepth); !compact {
		p = compactJSON(p)
	}
	if len(p) > MaxPayloadSize {
		return nil, payloadTooLarge(len(p))
	}
	return p, nil
}

// payloadTooLarge is the error of a payload of n bytes, over MaxPayloadSize.
func payloadTooLarge(n int) *InvalidError {
	e := invalid("payload", "%d bytes, over the %d-byte limit", n, MaxPayloadSize)
	e.cause = &PayloadSizeError{Size: n, Max: MaxPayloadSize}
	return e
}

// payloadTooDeep is the error of a payload p nested deeper than
// MaxPayloadDepth; its cause measures the whole depth.
func payloadTooDeep(p []byte) *InvalidError {
	e := invalid("payload", "nested deeper than %d levels", MaxPayloadDepth)
	e.cause = &PayloadDepthError{Depth: wirecodec.JSONDepth(p), Max: MaxPayloadDepth}
	return e
}

// compactJSON returns the compact form of valid JSON text.
func compactJSON(p []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(p))
	if err := json.Compact(&buf, p); err != nil {
		return p // not reached for valid input
	}
	return buf.Bytes()
}

// wirePayload returns the payload as it goes on the wire, for a payload
// that passed checkPayload with the given compactness.
func wirePayload(p []byte, compact bool) []byte {
	switch {
	case len(p) == 0:
		return jsonNull
	case compact:
		return p
	default:
		return compactJSON(p)
	}
}
