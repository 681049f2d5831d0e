package envelope

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"
)

// Factory creates envelopes. Its clock and ID source are fields, so tests
// inject a fixed clock and counting IDs and get the same envelopes, byte
// for byte, on every run (syncthing's updateWithNow pattern); [NewFactory]
// sets the real ones. The zero Factory works too: a nil field means the
// default.
//
// A Factory is safe for concurrent use if its Now and NewID are.
type Factory struct {
	// Now returns the current time. Timestamps are its Unix milliseconds,
	// raised to 1 if not positive. Nil means time.Now.
	Now func() time.Time
	// NewID returns a fresh message ID; it must be 1 to MaxIDLen bytes of
	// printable ASCII and unique. Nil means [NewID].
	NewID func() string
}

// NewFactory returns a Factory with the real clock (time.Now) and random
// IDs ([NewID]).
func NewFactory() *Factory {
	return &Factory{Now: time.Now, NewID: NewID}
}

// NewID returns a random message ID: 128 bits as 32 lower-case hex
// characters, from ChaCha8 generators (a CSPRNG) each seeded from
// crypto/rand. Drawing from crypto/rand itself cost a getrandom call per
// envelope, about a third of building one on the message path; a pool of
// seeded generators gives the same unpredictability without it.
func NewID() string {
	g := idSources.Get().(*rand.ChaCha8)
	var b [16]byte
	_, _ = g.Read(b[:]) // never fails
	idSources.Put(g)
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// idSources are NewID's generators, one per concurrent caller.
var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails: crypto/rand crashes the program instead
	return rand.NewChaCha8(seed)
}}

// New creates a validated envelope from sender to recipient, with a fresh
// ID and the current time, schema version [SchemaVersion], no correlation
// ID and no metadata.
//
// The payload may be a json.RawMessage or a []byte holding JSON (checked,
// compacted and copied), nil (null), or any other value, which is encoded
// with encoding/json (without HTML escaping).
func (f *Factory) New(sender, recipient string, t Type, payload any) (*Envelope, error) {
	return f.build(sender, recipient, "", t, payload)
}

func (f *Factory) build(sender, recipient, correlationID string, t Type, payload any) (*Envelope, error) {
	p, err := marshalPayload(payload)
	if err != nil {
		return nil, err
	}
	e := &Envelope{
		ID:            f.id(),
		SchemaVersion: SchemaVersion,
		Sender:        sender,
		Recipient:     recipient,
		CorrelationID: correlationID,
		Type:          t,
		Timestamp:     f.timestamp(),
		Payload:       p,
	}
	// marshalPayload has checked the payload and made it compact: only the
	// header is left to check.
	if _, err := e.checkAll(true); err != nil {
		return nil, err
	}
	return e, nil
}

// Reply creates a validated reply to an envelope: from its recipient to its
// sender, in its thread (CorrelationID is to.ThreadID()), with no metadata
// (the caller sets it). For a broadcast or capability-routed envelope,
// to.Recipient names no agent ("*" or a capability ID would become the
// sender): use [Factory.ReplyAs] there.
func (f *Factory) Reply(to *Envelope, t Type, payload any) (*Envelope, error) {
	if to == nil {
		return nil, invalid("", "reply to a nil envelope")
	}
	return f.ReplyAs(to.Recipient, to, t, payload)
}

// ReplyAs is [Factory.Reply] with an explicit sender, for replies to a
// broadcast ([Broadcast]) or to a capability (routingHint "capability"),
// where the replying agent is not to.Recipient.
func (f *Factory) ReplyAs(sender string, to *Envelope, t Type, payload any) (*Envelope, error) {
	if to == nil {
		return nil, invalid("", "reply to a nil envelope")
	}
	thread := to.ThreadID()
	if thread == "" {
		return nil, invalid("", "reply to an envelope without id")
	}
	return f.build(sender, to.Sender, thread, t, payload)
}

func (f *Factory) id() string {
	if f == nil || f.NewID == nil {
		return NewID()
	}
	return f.NewID()
}

func (f *Factory) timestamp() int64 {
	now := time.Now
	if f != nil && f.Now != nil {
		now = f.Now
	}
	return max(1, now().UnixMilli())
}

// marshalPayload turns New's payload argument into compact JSON.
func marshalPayload(payload any) (json.RawMessage, error) {
	var raw []byte
	switch v := payload.(type) {
	case nil:
		return json.RawMessage(bytes.Clone(jsonNull)), nil
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		enc := encoders.Get().(*payloadEncoder)
		defer enc.put()
		if err := enc.Encode(v); err != nil {
			return nil, malformed("payload", "cannot encode as json", err)
		}
		raw = bytes.TrimSuffix(enc.buf.Bytes(), []byte{'\n'})
		// encoding/json writes valid compact JSON, but a MarshalJSON
		// method or a RawMessage inside v may bring invalid UTF-8, and the
		// size and depth limits are ours: normalizePayload checks all in
		// one pass. The encoder's buffer is reused: keep a copy.
		p, err := normalizePayload(raw)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(p), nil
	}
	p, err := normalizePayload(raw)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 && &p[0] == &raw[0] {
		p = bytes.Clone(p) // do not alias the caller's bytes
	}
	return p, nil
}

// payloadEncoder is a JSON encoder without HTML escaping that writes into
// its own buffer. Factories reuse them (encoders) to save the encoder and
// the buffer's growth on every envelope.
type payloadEncoder struct {
	buf bytes.Buffer
	*json.Encoder
}

// maxPooledBuffer is the largest buffer a payloadEncoder keeps for reuse,
// so that one huge payload does not pin its memory in the pool.
const maxPooledBuffer = 64 << 10

var encoders = sync.Pool{New: func() any {
	e := new(payloadEncoder)
	e.Encoder = json.NewEncoder(&e.buf)
	e.SetEscapeHTML(false)
	return e
}}

func (e *payloadEncoder) put() {
	if e.buf.Cap() > maxPooledBuffer {
		return
	}
	e.buf.Reset()
	encoders.Put(e)
}
