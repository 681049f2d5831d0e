package protocol

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/envelope"
)

// Frame kinds on /nova/a2a/1.0.0. Each frame body is one CBOR-encoded
// wireMsg (core deterministic encoding); see docs/wire-protocol.md.
const (
	kindHello    uint8 = 1 // the opener's signed agent cards
	kindEnvelope uint8 = 2 // one envelope, to be acknowledged by Seq
	kindAck      uint8 = 3 // envelope Seq accepted and delivered
	kindNack     uint8 = 4 // envelope Seq refused: Code + Msg
)

// maxHelloCards caps the cards in one hello frame.
const maxHelloCards = 1024

type wireMsg struct {
	Kind  uint8              `cbor:"k"`
	Seq   uint64             `cbor:"s,omitempty"`
	Env   *envelope.Envelope `cbor:"e,omitempty"`
	Cards [][]byte           `cbor:"c,omitempty"`
	Code  string             `cbor:"x,omitempty"`
	Msg   string             `cbor:"m,omitempty"`
}

// inMsg is wireMsg as received: the envelope stays raw CBOR until
// envelope.DecodeCBOR checks it (schema version first, every field, payload
// compacted), so a bad envelope is answered with a nack carrying its code,
// not a reset.
type inMsg struct {
	Kind  uint8           `cbor:"k"`
	Seq   uint64          `cbor:"s,omitempty"`
	Env   cbor.RawMessage `cbor:"e,omitempty"`
	Cards [][]byte        `cbor:"c,omitempty"`
	Code  string          `cbor:"x,omitempty"`
	Msg   string          `cbor:"m,omitempty"`
}

func encodeMsg(m *wireMsg) ([]byte, error) {
	return envelope.EncMode().Marshal(m)
}

// decodeMsg decodes and checks one frame body. Every failure is a protocol
// error caused by the peer: the caller resets the stream.
func decodeMsg(b []byte) (*inMsg, error) {
	var m inMsg
	if err := envelope.DecMode().Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: undecodable frame: %v", ErrProtocol, err)
	}
	switch m.Kind {
	case kindHello:
		if len(m.Cards) > maxHelloCards {
			return nil, fmt.Errorf("%w: hello with %d cards (max %d)", ErrProtocol, len(m.Cards), maxHelloCards)
		}
	case kindEnvelope:
		if len(m.Env) == 0 {
			return nil, fmt.Errorf("%w: envelope frame without envelope", ErrProtocol)
		}
		// Validation failures (including SCHEMA_VERSION_MISMATCH) are answered
		// with a nack by the caller, not a reset: the frame itself was sound.
	case kindAck, kindNack:
		if m.Seq == 0 {
			return nil, fmt.Errorf("%w: ack without sequence", ErrProtocol)
		}
	default:
		return nil, fmt.Errorf("%w: unknown frame kind %d", ErrProtocol, m.Kind)
	}
	return &m, nil
}
