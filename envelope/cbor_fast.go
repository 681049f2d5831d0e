package envelope

import (
	"math"
	"strings"
	"unicode/utf8"
)

// The fast path of DecodeCBOR reads the canonical encoding, the one
// EncodeCBOR writes (core deterministic key order, optional keys omitted
// when empty, definite lengths, no tags), without reflection: it is what
// every nova node sends, and decoding it reflectively was the largest cost
// of receiving an envelope. Anything else, including every malformed,
// non-canonical or wrongly typed input, makes the fast path step aside and
// the strict reflective decoder decide, so every error, limit and field
// rule stays that decoder's. The fast path must never accept an input the
// reflective decoder would reject or read differently; FuzzDecodeFast
// checks exactly that.

// Canonical key order (RFC 8949 core deterministic: bytewise order of the
// encoded keys, so shorter keys first).
var (
	keyID            = "id"
	keyType          = "type"
	keySender        = "sender"
	keyPayload       = "payload"
	keyMetadata      = "metadata"
	keyRecipient     = "recipient"
	keyTimestamp     = "timestamp"
	keyCorrelationID = "correlationId"
	keySchemaVersion = "schemaVersion"

	keyTier          = "tier"
	keySandboxID     = "sandboxId"
	keyRoutingHint   = "routingHint"
	keyJustification = "escalationJustification"
)

// cborReader walks one input; a failed read sets bad and every later read
// fails too, so callers check once at the end.
type cborReader struct {
	b   []byte
	i   int
	bad bool
}

// head reads an item head: major type and argument. Only definite lengths
// and arguments up to 8 bytes are accepted.
func (r *cborReader) head() (major byte, arg uint64) {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return 0, 0
	}
	c := r.b[r.i]
	r.i++
	major, ai := c>>5, c&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai)
	case ai <= 27:
		n := 1 << (ai - 24)
		if len(r.b)-r.i < n {
			r.bad = true
			return 0, 0
		}
		for _, x := range r.b[r.i : r.i+n] {
			arg = arg<<8 | uint64(x)
		}
		r.i += n
		return major, arg
	}
	r.bad = true // indefinite length or reserved
	return 0, 0
}

// bytesOf reads a string of major type want (2 bytes, 3 text) and returns
// its content, still in the input.
func (r *cborReader) bytesOf(want byte) []byte {
	major, n := r.head()
	if r.bad || major != want || n > uint64(len(r.b)-r.i) {
		r.bad = true
		return nil
	}
	s := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return s
}

// text reads a text string, which must be UTF-8 (the reflective decoder
// rejects invalid text), and returns where it is in the input.
func (r *cborReader) text() span {
	s := r.bytesOf(3)
	if r.bad || !utf8.Valid(s) {
		r.bad = true
		return span{}
	}
	return span{r.i - len(s), len(s)}
}

// span is where a text string's bytes are in the input.
type span struct{ off, n int }

// spans are the text fields of one envelope as the fast path finds them.
// They become strings only once the whole envelope is read: as substrings
// of one string made of their bytes alone (not of the payload between
// them), one allocation for every field instead of one per field.
type spans struct {
	id, typ, sender, recipient, correlation span
	sandbox, hint, justification            span
}

// set makes the strings of w from the input in.
func (sp *spans) set(in []byte, w *wireEnvelope) {
	fields := [...]*span{&sp.id, &sp.typ, &sp.sender, &sp.recipient, &sp.correlation, &sp.sandbox, &sp.hint, &sp.justification}
	total := 0
	for _, f := range fields {
		total += f.n
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, f := range fields {
		sb.Write(in[f.off : f.off+f.n])
	}
	all := sb.String()
	var strs [len(fields)]string
	off := 0
	for i, f := range fields {
		strs[i] = all[off : off+f.n]
		off += f.n
	}
	w.ID, w.Type, w.Sender, w.Recipient, w.CorrelationID = strs[0], strs[1], strs[2], strs[3], strs[4]
	if m := w.Metadata; m != nil {
		m.SandboxID, m.RoutingHint, m.EscalationJustification = strs[5], strs[6], strs[7]
	}
}

// key reports whether the next item is the text string k, and if so
// consumes it.
func (r *cborReader) key(k string) bool {
	if r.bad || len(k) > 0xff {
		return false
	}
	hl := 1
	if len(k) >= 24 {
		hl = 2
	}
	if len(r.b)-r.i < hl+len(k) {
		return false
	}
	if hl == 1 {
		if r.b[r.i] != 0x60|byte(len(k)) {
			return false
		}
	} else if r.b[r.i] != 0x78 || r.b[r.i+1] != byte(len(k)) {
		return false
	}
	if string(r.b[r.i+hl:r.i+hl+len(k)]) != k {
		return false
	}
	r.i += hl + len(k)
	return true
}

// uint reads an unsigned integer no larger than max.
func (r *cborReader) uint(max uint64) uint64 {
	major, v := r.head()
	if r.bad || major != 0 || v > max {
		r.bad = true
		return 0
	}
	return v
}

// mapLen reads a map head.
func (r *cborReader) mapLen() uint64 {
	major, n := r.head()
	if r.bad || major != 5 {
		r.bad = true
		return 0
	}
	return n
}

// DecodeCanonicalPrefix decodes the envelope at the start of b when it is
// in the canonical encoding EncodeCBOR writes and valid, and returns it
// with the number of bytes it took. For anything else (another encoding of
// the same envelope, an invalid one, garbage) ok is false and the caller
// decodes the item with [DecodeCBOR], which gives the exact error. Frame
// decoders use it to read an embedded envelope in one pass.
func DecodeCanonicalPrefix(b []byte) (e *Envelope, n int, ok bool) {
	d := new(cborDecoding)
	n, ok = decodeCanonical(b, d)
	if !ok || n > MaxEncodedSize {
		return nil, 0, false
	}
	e, err := d.finish()
	if err != nil {
		return nil, 0, false
	}
	return e, n, true
}

// decodeCanonical fills d.w from the canonical encoding at the start of b
// and reports how many bytes it took; on false d.w is unspecified and the
// caller decodes b reflectively.
func decodeCanonical(b []byte, d *cborDecoding) (int, bool) {
	r := cborReader{b: b}
	w := &d.w
	n := r.mapLen()
	if r.bad || n < 7 || n > 9 {
		return 0, false
	}
	pairs := uint64(0)
	var sp spans
	if !r.key(keyID) {
		return 0, false
	}
	sp.id = r.text()
	if !r.key(keyType) {
		return 0, false
	}
	sp.typ = r.text()
	if !r.key(keySender) {
		return 0, false
	}
	sp.sender = r.text()
	if !r.key(keyPayload) {
		return 0, false
	}
	if p := r.bytesOf(2); !r.bad {
		w.Payload = append(make([]byte, 0, len(p)), p...) // the input is the caller's buffer
	}
	pairs += 4
	if r.key(keyMetadata) {
		if !decodeCanonicalMetadata(&r, d, &sp) {
			return 0, false
		}
		pairs++
	}
	if !r.key(keyRecipient) {
		return 0, false
	}
	sp.recipient = r.text()
	if !r.key(keyTimestamp) {
		return 0, false
	}
	w.Timestamp = int64(r.uint(math.MaxInt64)) // negative ones take the strict path
	pairs += 2
	if r.key(keyCorrelationID) {
		sp.correlation = r.text()
		pairs++
	}
	if !r.key(keySchemaVersion) {
		return 0, false
	}
	// Any other version, valid or not, is for the strict path to report.
	if r.uint(SchemaVersion) != SchemaVersion {
		return 0, false
	}
	d.version = SchemaVersion
	w.SchemaVersion = &d.version
	pairs++
	if r.bad || pairs != n {
		return 0, false
	}
	sp.set(b[:r.i], w)
	return r.i, true
}

func decodeCanonicalMetadata(r *cborReader, d *cborDecoding, sp *spans) bool {
	n := r.mapLen()
	if r.bad || n < 1 || n > 4 || !r.key(keyTier) {
		return false
	}
	m := &d.wm
	d.tier = uint8(r.uint(math.MaxUint8))
	m.Tier = &d.tier
	pairs := uint64(1)
	if r.key(keySandboxID) {
		sp.sandbox = r.text()
		pairs++
	}
	if r.key(keyRoutingHint) {
		sp.hint = r.text()
		pairs++
	}
	if r.key(keyJustification) {
		sp.justification = r.text()
		pairs++
	}
	d.w.Metadata = m
	return !r.bad && pairs == n
}
