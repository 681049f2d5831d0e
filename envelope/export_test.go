package envelope

// Test hooks for the external tests of the canonical fast path.

// DecodeCBORStrict is DecodeCBOR without the fast path: the reference.
var DecodeCBORStrict = decodeCBORStrict

// DecodeCanonicalLen runs only the fast path's reading of b: how many
// bytes of b it took, or false where it steps aside.
func DecodeCanonicalLen(b []byte) (int, bool) { return decodeCanonical(b, new(cborDecoding)) }

// FastWireAgrees reports whether, wherever the fast path reads a prefix
// of b, the strict decoder accepts that prefix and reads the same wire
// form; it returns a description of the first disagreement, or "".
func FastWireAgrees(b []byte) string {
	d := new(cborDecoding)
	n, ok := decodeCanonical(b, d)
	if !ok {
		return ""
	}
	var w wireEnvelope
	if err := decMode.Unmarshal(b[:n], &w); err != nil {
		return "fast path read what the strict decoder refuses: " + err.Error()
	}
	if !sameWire(&d.w, &w) {
		return "fast path and strict decoder read different envelopes"
	}
	return ""
}

func sameWire(a, b *wireEnvelope) bool {
	eqInt := func(x, y *int) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	if a.ID != b.ID || !eqInt(a.SchemaVersion, b.SchemaVersion) || a.Sender != b.Sender || a.Recipient != b.Recipient ||
		a.CorrelationID != b.CorrelationID || a.Type != b.Type || a.Timestamp != b.Timestamp ||
		string(a.Payload) != string(b.Payload) || (a.Payload == nil) != (b.Payload == nil) {
		return false
	}
	if (a.Metadata == nil) != (b.Metadata == nil) {
		return false
	}
	if m, n := a.Metadata, b.Metadata; m != nil {
		if (m.Tier == nil) != (n.Tier == nil) || m.Tier != nil && *m.Tier != *n.Tier ||
			m.SandboxID != n.SandboxID || m.RoutingHint != n.RoutingHint || m.EscalationJustification != n.EscalationJustification {
			return false
		}
	}
	return true
}

// AppendCanonical is the canonical encoder with e.Payload as the wire
// payload.
func AppendCanonical(dst []byte, e *Envelope) []byte { return appendCanonical(dst, e, e.Payload) }

// NewThreadsSmall is NewThreads with a byte bound below MaxEncodedSize, so
// that tests reach it with small envelopes.
var NewThreadsSmall = newThreads
