package protocol

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Frame kinds on /nova/a2a/1.0.0. Each frame body is one CBOR-encoded
// wireMsg (core deterministic encoding); see docs/wire-protocol.md.
//
// On an outbound stream the opener sends hello, open and envelope frames; the
// other side answers with opened, ack and nack frames.
const (
	kindHello    uint8 = 1 // the opener's signed agent cards; Full: Roster is every agent it hosts
	kindEnvelope uint8 = 2 // one envelope on channel Ch with sequence Seq
	kindAck      uint8 = 3 // channel Ch: every sequence <= Seq is taken
	kindNack     uint8 = 4 // channel Ch: sequence Seq refused (Code, Msg); Seq 0 refuses the open
	kindOpen     uint8 = 5 // open channel Ch from agent From to agent To
	kindOpened   uint8 = 6 // channel Ch accepted; W is the receiver's watermark, Seq the highest sequence it has queued
	kindCancel   uint8 = 7 // the opener's agent From no longer waits for the answer to its request ID: stop its handler (best effort)
)

// Features a node states in the last frame of its hello (Feat): what it
// understands beyond the frames above, so a peer sends it nothing an older
// node would take for a protocol error.
const featCancel uint64 = 1 // kindCancel

// maxHelloCards caps the cards in one hello frame, and the names in a
// hello's roster.
const maxHelloCards = 1024

// maxHelloRecords caps the authority records in one hello frame.
const maxHelloRecords = 1024

// maxChannelID caps channel ids (random 128-bit hex: 32 bytes).
const maxChannelID = 64

type wireMsg struct {
	Kind  uint8              `cbor:"k"`
	Seq   uint64             `cbor:"s,omitempty"`
	Ch    string             `cbor:"h,omitempty"`
	From  string             `cbor:"f,omitempty"`
	To    string             `cbor:"t,omitempty"`
	W     uint64             `cbor:"w,omitempty"`
	Env   *envelope.Envelope `cbor:"e,omitempty"`
	Cards [][]byte           `cbor:"c,omitempty"`
	Code  string             `cbor:"x,omitempty"`
	Msg   string             `cbor:"m,omitempty"`
	// Full marks the last hello frame of an announcement: Roster lists
	// the ids of every agent the sender hosts now, so that the receiver
	// drops the cards of the others at once. Nodes before it ignore both.
	Full   bool     `cbor:"l,omitempty"`
	Roster []string `cbor:"r,omitempty"`
	// Boot (with Seq) orders a roster: a receiver applies no roster
	// older than one it applied from the same Boot, so a snapshot written
	// late (two announcements racing) never withdraws a newer agent.
	Boot uint64 `cbor:"b,omitempty"`
	// Auth carries the swarm authority's signed records a hello presents
	// (Authority.Records): its log of admin updates, revocations and
	// grants, in that order. Nodes before it ignore the field, and a node
	// without an authority treats a hello without it as ungranted.
	Auth [][]byte `cbor:"g,omitempty"`
	// ID is the envelope a cancel frame names.
	ID string `cbor:"i,omitempty"`
	// Feat, in the last hello frame, is the sender's features (featCancel).
	Feat uint64 `cbor:"v,omitempty"`
}

// envMsg is an envelope frame as sent: the envelope is already encoded
// (envelope.EncodeCBOR, done once per envelope) and embedded as is. AckNow
// asks the receiver to acknowledge as soon as the envelope is handled,
// because the sender is waiting for that acknowledgement (Router.Send);
// otherwise the receiver coalesces acknowledgements (see ackDelay and
// answerAckDelay).
type envMsg struct {
	Kind   uint8           `cbor:"k"`
	Seq    uint64          `cbor:"s"`
	Ch     string          `cbor:"h"`
	Env    cbor.RawMessage `cbor:"e"`
	AckNow bool            `cbor:"a,omitempty"`
}

// inMsg is wireMsg as received: the envelope stays raw CBOR until
// envelope.DecodeCBOR checks it (schema version first, every field, payload
// compacted), so a bad envelope is answered with a nack carrying its code,
// not a reset.
type inMsg struct {
	Kind   uint8     `cbor:"k"`
	Seq    uint64    `cbor:"s,omitempty"`
	Ch     string    `cbor:"h,omitempty"`
	From   string    `cbor:"f,omitempty"`
	To     string    `cbor:"t,omitempty"`
	W      uint64    `cbor:"w,omitempty"`
	Env    frameItem `cbor:"e,omitempty"`
	Cards  [][]byte  `cbor:"c,omitempty"`
	Code   string    `cbor:"x,omitempty"`
	Msg    string    `cbor:"m,omitempty"`
	Ack    bool      `cbor:"a,omitempty"`
	Full   bool      `cbor:"l,omitempty"`
	Roster []string  `cbor:"r,omitempty"`
	Boot   uint64    `cbor:"b,omitempty"`
	Auth   [][]byte  `cbor:"g,omitempty"`
	ID     string    `cbor:"i,omitempty"`
	Feat   uint64    `cbor:"v,omitempty"`

	// env is Env already decoded and checked (by decodeEnvFrame), or nil.
	env *envelope.Envelope
}

// appendEnvFrame appends the body of an envelope frame to dst: exactly
// what encoding &envMsg{kindEnvelope, seq, ch, env, ackNow} with
// envelope.EncMode() gives (core deterministic: the one-letter keys in
// byte order a, e, h, k, s; "a" only when set), written by hand because
// it runs once per envelope sent and reflection costs more than the
// envelope's own encoding. env is one encoded CBOR item, embedded as is.
func appendEnvFrame(dst []byte, ch string, seq uint64, env []byte, ackNow bool) []byte {
	n := byte(4)
	if ackNow {
		n = 5
	}
	dst = append(dst, 0xa0|n) // map of n pairs
	if ackNow {
		dst = append(dst, 0x61, 'a', 0xf5) // "a": true
	}
	dst = append(dst, 0x61, 'e')
	dst = append(dst, env...)
	dst = append(dst, 0x61, 'h')
	dst = wirecodec.AppendHead(dst, 3, uint64(len(ch))) // text string
	dst = append(dst, ch...)
	dst = append(dst, 0x61, 'k', kindEnvelope) // kinds are < 24: one byte
	dst = append(dst, 0x61, 's')
	return wirecodec.AppendHead(dst, 0, seq) // unsigned integer
}

// appendFramedEnv appends one envelope frame with its length prefix.
func appendFramedEnv(dst []byte, ch string, seq uint64, env []byte, ackNow bool) []byte {
	dst = binary.AppendUvarint(dst, uint64(envFrameLen(ch, seq, env, ackNow)))
	return appendEnvFrame(dst, ch, seq, env, ackNow)
}

// envFrameLen is the length of appendEnvFrame's output.
func envFrameLen(ch string, seq uint64, env []byte, ackNow bool) int {
	n := 1 + 2 + len(env) + 2 + wirecodec.HeadLen(uint64(len(ch))) + len(ch) + 3 + 2 + wirecodec.HeadLen(seq)
	if ackNow {
		n += 3
	}
	return n
}

// frameItem is one CBOR item left undecoded in the frame it came in, not
// copied (as cbor.RawMessage would): valid only until the next frame is
// read, which is why the stream loop decodes it at once.
type frameItem []byte

// UnmarshalCBOR keeps b, a well-formed item (the decoder checked the whole
// frame first) inside the frame's buffer.
func (f *frameItem) UnmarshalCBOR(b []byte) error {
	*f = b
	return nil
}

func encodeMsg(m *wireMsg) ([]byte, error) {
	return envelope.EncMode().Marshal(m)
}

// decodeMsg decodes and checks one frame body. Every failure is a protocol
// error caused by the peer: the caller resets the stream. An envelope frame
// exactly as appendEnvFrame writes it, carrying a valid envelope in the
// canonical encoding (what every nova node sends), is read in one pass
// without reflection (decodeEnvFrame); any other input goes to the strict
// decoder, which decides every error.
func decodeMsg(b []byte) (*inMsg, error) {
	return decodeMsgReuse(b, new(inMsg), "")
}

// decodeMsgReuse is decodeMsg for a stream loop: a canonical envelope frame
// is decoded into *into, which the loop reuses for every frame, and its
// channel id is ch itself when they are equal (a stream mostly carries one
// channel), so such a frame allocates only its envelope.
func decodeMsgReuse(b []byte, into *inMsg, ch string) (*inMsg, error) {
	if decodeEnvFrameInto(b, into, ch) {
		return into, nil
	}
	return decodeMsgStrict(b)
}

// decodeEnvFrame reads a canonical envelope frame: a map of 4 or 5 pairs,
// "a": true (only when set), "e": the envelope, "h": the channel, "k": 2,
// "s": the sequence. ok is false for anything else, with nothing decided.
// FuzzDecodeEnvFrame checks that it never accepts what decodeMsgStrict
// refuses or reads it differently.
func decodeEnvFrame(b []byte) (m *inMsg, ok bool) {
	m = new(inMsg)
	if !decodeEnvFrameInto(b, m, "") {
		return nil, false
	}
	return m, true
}

// decodeEnvFrameInto is decodeEnvFrame into *m (overwritten only when it
// returns true), with the channel id taken from ch when equal.
func decodeEnvFrameInto(b []byte, m *inMsg, ch string) bool {
	if len(b) < 1 || b[0] != 0xa4 && b[0] != 0xa5 {
		return false
	}
	i, ack := 1, b[0] == 0xa5
	expect := func(p ...byte) bool {
		if len(b)-i < len(p) || string(b[i:i+len(p)]) != string(p) {
			return false
		}
		i += len(p)
		return true
	}
	if ack && !expect(0x61, 'a', 0xf5) || !expect(0x61, 'e') {
		return false
	}
	env, n, ok := envelope.DecodeCanonicalPrefix(b[i:])
	if !ok {
		return false
	}
	raw := b[i : i+n]
	i += n
	if !expect(0x61, 'h') || i >= len(b) {
		return false
	}
	// The channel: a short text string (at most maxChannelID < 256 bytes).
	var chLen int
	switch c := b[i]; {
	case c >= 0x61 && c <= 0x77: // 1 to 23 bytes
		chLen, i = int(c-0x60), i+1
	case c == 0x78 && len(b)-i >= 2 && b[i+1] >= 24: // 24 to 255 bytes, shortest head
		chLen, i = int(b[i+1]), i+2
	default:
		return false
	}
	if chLen > maxChannelID || len(b)-i < chLen || !utf8.Valid(b[i:i+chLen]) {
		return false
	}
	if string(b[i:i+chLen]) != ch { // compared without a copy
		ch = string(b[i : i+chLen])
	}
	i += chLen
	if !expect(0x61, 'k', kindEnvelope, 0x61, 's') || i >= len(b) {
		return false
	}
	// The sequence: an unsigned integer of at least 1.
	var seq uint64
	c := b[i]
	i++
	switch ai := c & 0x1f; {
	case c>>5 != 0 || ai > 27:
		return false
	case ai < 24:
		seq = uint64(ai)
	default:
		w := 1 << (ai - 24)
		if len(b)-i < w {
			return false
		}
		for _, x := range b[i : i+w] {
			seq = seq<<8 | uint64(x)
		}
		i += w
	}
	if seq == 0 || i != len(b) {
		return false
	}
	*m = inMsg{Kind: kindEnvelope, Seq: seq, Ch: ch, Env: raw, Ack: ack, env: env}
	return true
}

// decodeMsgStrict is decodeMsg without the envelope fast path: the
// reflective decoder with every limit.
func decodeMsgStrict(b []byte) (*inMsg, error) {
	var m inMsg
	if err := envelope.DecMode().Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: undecodable frame: %v", ErrProtocol, err)
	}
	if len(m.Ch) > maxChannelID {
		return nil, fmt.Errorf("%w: channel id of %d bytes", ErrProtocol, len(m.Ch))
	}
	needCh := func() error {
		if m.Ch == "" {
			return fmt.Errorf("%w: frame kind %d without channel", ErrProtocol, m.Kind)
		}
		return nil
	}
	switch m.Kind {
	case kindHello:
		if len(m.Cards) > maxHelloCards {
			return nil, fmt.Errorf("%w: hello with %d cards (max %d)", ErrProtocol, len(m.Cards), maxHelloCards)
		}
		if len(m.Auth) > maxHelloRecords {
			return nil, fmt.Errorf("%w: hello with %d authority records (max %d)", ErrProtocol, len(m.Auth), maxHelloRecords)
		}
		if len(m.Roster) > maxHelloCards {
			return nil, fmt.Errorf("%w: hello roster of %d agents (max %d)", ErrProtocol, len(m.Roster), maxHelloCards)
		}
		for _, id := range m.Roster {
			if len(id) == 0 || len(id) > envelope.MaxAgentLen {
				return nil, fmt.Errorf("%w: hello roster with an agent id of %d bytes", ErrProtocol, len(id))
			}
		}
	case kindEnvelope:
		if len(m.Env) == 0 || m.Seq == 0 {
			return nil, fmt.Errorf("%w: envelope frame without envelope or sequence", ErrProtocol)
		}
		// Validation failures (including SCHEMA_VERSION_MISMATCH) are answered
		// with a nack by the caller, not a reset: the frame itself was sound.
		return &m, needCh()
	case kindAck, kindOpened:
		return &m, needCh()
	case kindNack:
		return &m, needCh()
	case kindOpen:
		if m.From == "" || m.To == "" {
			return nil, fmt.Errorf("%w: open frame without agents", ErrProtocol)
		}
		return &m, needCh()
	case kindCancel:
		if m.From == "" || len(m.From) > envelope.MaxAgentLen || m.ID == "" || len(m.ID) > envelope.MaxIDLen {
			return nil, fmt.Errorf("%w: cancel frame without its agent and envelope", ErrProtocol)
		}
		return &m, nil
	default:
		return nil, fmt.Errorf("%w: unknown frame kind %d", ErrProtocol, m.Kind)
	}
	return &m, nil
}
