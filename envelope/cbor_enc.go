package envelope

// The canonical encoder writes by hand exactly what encMode.Marshal writes
// for an *Envelope (RFC 8949 core deterministic encoding of the struct and
// its cbor tags): every envelope a node sends goes through it, and the
// reflective encoder cost more than the rest of sending put together, in a
// buffer it grew as it went. TestCanonicalEncoderMatchesReflective checks
// the two byte for byte on generated envelopes.

import "github.com/nova-node/nova-node/internal/wirecodec"

// Encoded keys, in core deterministic order (shorter first, then bytewise).
var (
	encKeyID            = cborText(keyID)
	encKeyType          = cborText(keyType)
	encKeySender        = cborText(keySender)
	encKeyPayload       = cborText(keyPayload)
	encKeyMetadata      = cborText(keyMetadata)
	encKeyRecipient     = cborText(keyRecipient)
	encKeyTimestamp     = cborText(keyTimestamp)
	encKeyCorrelationID = cborText(keyCorrelationID)
	encKeySchemaVersion = cborText(keySchemaVersion)

	encKeyTier          = cborText(keyTier)
	encKeySandboxID     = cborText(keySandboxID)
	encKeyRoutingHint   = cborText(keyRoutingHint)
	encKeyJustification = cborText(keyJustification)
)

func cborText(s string) string { return string(appendCBORText(nil, s)) }

// appendCanonical appends the canonical encoding of e with payload (its
// wire form: compact JSON, "null" for none) in place of e.Payload.
func appendCanonical(dst []byte, e *Envelope, payload []byte) []byte {
	n := 7 // id, type, sender, payload, recipient, timestamp, schemaVersion
	if e.Metadata != nil {
		n++
	}
	if e.CorrelationID != "" {
		n++
	}
	dst = wirecodec.AppendHead(dst, 5, uint64(n))
	dst = append(dst, encKeyID...)
	dst = appendCBORText(dst, e.ID)
	dst = append(dst, encKeyType...)
	dst = appendCBORText(dst, string(e.Type))
	dst = append(dst, encKeySender...)
	dst = appendCBORText(dst, e.Sender)
	dst = append(dst, encKeyPayload...)
	dst = wirecodec.AppendHead(dst, 2, uint64(len(payload)))
	dst = append(dst, payload...)
	if m := e.Metadata; m != nil {
		dst = append(dst, encKeyMetadata...)
		mn := 1
		for _, s := range [...]string{m.SandboxID, m.RoutingHint, m.EscalationJustification} {
			if s != "" {
				mn++
			}
		}
		dst = wirecodec.AppendHead(dst, 5, uint64(mn))
		dst = append(dst, encKeyTier...)
		dst = wirecodec.AppendHead(dst, 0, uint64(m.Tier))
		if m.SandboxID != "" {
			dst = append(dst, encKeySandboxID...)
			dst = appendCBORText(dst, m.SandboxID)
		}
		if m.RoutingHint != "" {
			dst = append(dst, encKeyRoutingHint...)
			dst = appendCBORText(dst, m.RoutingHint)
		}
		if m.EscalationJustification != "" {
			dst = append(dst, encKeyJustification...)
			dst = appendCBORText(dst, m.EscalationJustification)
		}
	}
	dst = append(dst, encKeyRecipient...)
	dst = appendCBORText(dst, e.Recipient)
	dst = append(dst, encKeyTimestamp...)
	dst = appendCBORInt(dst, e.Timestamp)
	if e.CorrelationID != "" {
		dst = append(dst, encKeyCorrelationID...)
		dst = appendCBORText(dst, e.CorrelationID)
	}
	dst = append(dst, encKeySchemaVersion...)
	return appendCBORInt(dst, int64(e.SchemaVersion))
}

// canonicalLen is the length of appendCanonical's output.
func canonicalLen(e *Envelope, payload []byte) int {
	n := 1 + len(encKeyID) + textLen(e.ID) + len(encKeyType) + textLen(string(e.Type)) +
		len(encKeySender) + textLen(e.Sender) + len(encKeyPayload) + wirecodec.HeadLen(uint64(len(payload))) + len(payload) +
		len(encKeyRecipient) + textLen(e.Recipient) + len(encKeyTimestamp) + cborIntLen(e.Timestamp) +
		len(encKeySchemaVersion) + cborIntLen(int64(e.SchemaVersion))
	if m := e.Metadata; m != nil {
		n += len(encKeyMetadata) + 1 + len(encKeyTier) + wirecodec.HeadLen(uint64(m.Tier))
		if m.SandboxID != "" {
			n += len(encKeySandboxID) + textLen(m.SandboxID)
		}
		if m.RoutingHint != "" {
			n += len(encKeyRoutingHint) + textLen(m.RoutingHint)
		}
		if m.EscalationJustification != "" {
			n += len(encKeyJustification) + textLen(m.EscalationJustification)
		}
	}
	if e.CorrelationID != "" {
		n += len(encKeyCorrelationID) + textLen(e.CorrelationID)
	}
	return n
}

func appendCBORText(dst []byte, s string) []byte {
	return append(wirecodec.AppendHead(dst, 3, uint64(len(s))), s...)
}

func textLen(s string) int { return wirecodec.HeadLen(uint64(len(s))) + len(s) }

// appendCBORInt appends v as an unsigned (major 0) or negative (major 1)
// integer.
func appendCBORInt(dst []byte, v int64) []byte {
	if v < 0 {
		return wirecodec.AppendHead(dst, 1, uint64(-(v + 1)))
	}
	return wirecodec.AppendHead(dst, 0, uint64(v))
}

func cborIntLen(v int64) int {
	if v < 0 {
		return wirecodec.HeadLen(uint64(-(v + 1)))
	}
	return wirecodec.HeadLen(uint64(v))
}
