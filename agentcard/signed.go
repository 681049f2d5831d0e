package agentcard

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// PayloadDomain is the libp2p signature domain of signed cards: the
// signature covers it, so a card signature cannot be replayed as any other
// kind of libp2p record, nor the reverse.
const PayloadDomain = "nova-agentcard"

// payloadType is the envelope payload type of signed cards; the version
// changes when the card's JSON schema does.
const payloadType = "/nova/agentcard/1"

// PayloadType is the envelope payload type of signed cards,
// "/nova/agentcard/1". It is a copy: changing it changes nothing.
var PayloadType = []byte(payloadType)

// MaxSignedCardSize bounds a signed card (the marshalled envelope) and the
// card JSON inside it. [Open] rejects larger input before parsing it, and
// [Seal] never produces it.
const MaxSignedCardSize = 64 << 10

func init() { record.RegisterType(&Record{}) }

// Record is a card as a libp2p [record.Record]: domain [PayloadDomain],
// codec [PayloadType], payload the card's JSON. It is registered with
// [record.RegisterType], so [record.ConsumeEnvelope] yields a *Record. Its
// UnmarshalRecord is strict and size-capped and validates the card, but it
// does not check that the signer is the card's host: use [Open], which
// does.
type Record struct {
	Card Card
}

// Domain returns [PayloadDomain].
func (*Record) Domain() string { return PayloadDomain }

// Codec returns [PayloadType].
func (*Record) Codec() []byte { return []byte(payloadType) }

// MarshalRecord returns the card as compact JSON without HTML escaping.
func (r *Record) MarshalRecord() ([]byte, error) { return marshalCard(&r.Card) }

// UnmarshalRecord decodes a card payload: at most [MaxSignedCardSize]
// bytes, one JSON object decoded strictly (see [Card.UnmarshalJSON]), and a
// card that passes [Card.Validate]. On error r is unchanged.
func (r *Record) UnmarshalRecord(data []byte) error {
	c, err := decodePayload(data)
	if err != nil {
		return err
	}
	r.Card = c
	return nil
}

func decodePayload(data []byte) (Card, error) {
	if len(data) > MaxSignedCardSize {
		return Card{}, invalid("card", "payload is %d bytes, more than %d", len(data), MaxSignedCardSize)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Card{}, invalid("card", "must be a JSON object")
	}
	var c Card
	if err := c.decode(data, ""); err != nil {
		return Card{}, err
	}
	if err := c.Validate(); err != nil {
		return Card{}, err
	}
	return c, nil
}

// Seal signs c with the hosting node's key and returns the marshalled
// libp2p envelope. An empty c.Host is set to the key's peer ID; a Host
// naming another peer is an [*InvalidCardError] (problem "host"), as is any
// validation problem. The card is signed as given (its Origin, Revision and
// LastSeenAt included).
func Seal(c Card, key crypto.PrivKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("agentcard: seal: nil private key")
	}
	signer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("agentcard: seal: %w", err)
	}
	s := signer.String()
	if c.Host == "" {
		c.Host = s
	}
	ps := c.problems()
	if c.Host != s {
		ps = append(ps, FieldProblem{Field: "host", Reason: fmt.Sprintf("names %s but the signing key is %s", wirecodec.Quote(c.Host), s)})
	}
	if len(ps) > 0 {
		return nil, &InvalidCardError{Problems: ps}
	}
	env, err := record.Seal(&Record{Card: c}, key)
	if err != nil {
		return nil, fmt.Errorf("agentcard: seal %s: %w", c.Address(), err)
	}
	data, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("agentcard: seal %s: %w", c.Address(), err)
	}
	if len(data) > MaxSignedCardSize {
		return nil, invalid("envelope", "signed card is %d bytes, more than %d", len(data), MaxSignedCardSize)
	}
	return data, nil
}

// Open verifies and decodes a signed card. In order, it rejects input
// larger than [MaxSignedCardSize] (before parsing anything), an envelope
// that does not parse or whose signature does not verify for
// [PayloadDomain] (record.ConsumeTypedEnvelope), a payload type other than
// [PayloadType] (which ConsumeTypedEnvelope does not check), a payload that
// is not a valid card, and a card whose Host is not the signer. Every
// rejection is an [*InvalidCardError]. It returns the card, exactly as
// signed, and the signer.
func Open(data []byte) (Card, peer.ID, error) {
	if len(data) > MaxSignedCardSize {
		return Card{}, "", invalid("envelope", "is %d bytes, more than %d", len(data), MaxSignedCardSize)
	}
	env, err := record.ConsumeTypedEnvelope(data, &rawPayload{})
	if err != nil {
		if env == nil {
			return Card{}, "", invalid("envelope", "malformed: %v", err)
		}
		return Card{}, "", invalid("signature", "does not verify: %v", err)
	}
	if string(env.PayloadType) != payloadType {
		return Card{}, "", invalid("payloadType", "is %s, want %q", wirecodec.Quote(string(env.PayloadType)), payloadType)
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return Card{}, "", invalid("signature", "unusable public key: %v", err)
	}
	c, err := decodeSigned(env.RawPayload, signer)
	if err != nil {
		return Card{}, "", err
	}
	return c, signer, nil
}

// decodeSigned decodes payload, the payload of an envelope signed by
// signer, and checks that the card names signer as its host.
func decodeSigned(payload []byte, signer peer.ID) (Card, error) {
	c, err := decodePayload(payload)
	if err != nil {
		return Card{}, err
	}
	if c.Host != signer.String() {
		return Card{}, invalid("host", "names %s but the card is signed by %s", wirecodec.Quote(c.Host), signer)
	}
	// No spare capacity: the registry can then keep an opened card's
	// arrays as they are (MergeRemoteAtShared) without clipping them.
	clip(&c)
	return c, nil
}

// reopen decodes data, bytes that [Open] opened before as signed by
// signer, without checking the signature again: the caller knows them by
// their hash.
func reopen(data []byte, signer peer.ID) (Card, error) {
	env, err := record.UnmarshalEnvelope(data)
	if err != nil {
		return Card{}, invalid("envelope", "malformed: %v", err)
	}
	return decodeSigned(env.RawPayload, signer)
}

// rawPayload lets Open verify the signature before it parses the payload
// (and check the payload type first).
type rawPayload struct{}

func (*rawPayload) Domain() string { return PayloadDomain }
func (*rawPayload) Codec() []byte  { return []byte(payloadType) }
func (*rawPayload) MarshalRecord() ([]byte, error) {
	return nil, errors.New("agentcard: decode-only record")
}
func (*rawPayload) UnmarshalRecord([]byte) error { return nil }

// KeyPrefix starts the DHT key of every signed card:
// "/nova/card/<peerID>/<agent id>". The DHT namespace is "nova".
const KeyPrefix = "/nova/card/"

// Key returns the DHT key under which host publishes its agent id's card.
func Key(host peer.ID, id string) string {
	return KeyPrefix + host.String() + "/" + id
}

// ParseKey splits a key made by [Key]. A malformed key is an
// [*InvalidCardError] with the problem on "key".
func ParseKey(key string) (host peer.ID, id string, err error) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", "", invalid("key", "%s does not start with %q", wirecodec.Quote(key), KeyPrefix)
	}
	hostStr, id, ok := strings.Cut(rest, "/")
	if !ok || !ValidID(id) {
		return "", "", invalid("key", "%s does not end in /<peerID>/<agent id>", wirecodec.Quote(key))
	}
	host, err = decodePeer(hostStr)
	if err != nil {
		return "", "", invalid("key", "%s has a bad peer ID: %v", wirecodec.Quote(key), err)
	}
	return host, id, nil
}

// Validator checks signed cards stored in the DHT under [Key]. It has the
// method set of go-libp2p-record's Validator, so discovery can install it
// for the "nova" namespace. The zero value is ready to use.
type Validator struct{}

// Validate accepts value under key when [Open] accepts it, the signer is
// the key's peer and the card's id is the key's agent id.
func (Validator) Validate(key string, value []byte) error {
	_, err := validateKeyed(key, value)
	return err
}

func validateKeyed(key string, value []byte) (Card, error) {
	host, id, err := ParseKey(key)
	if err != nil {
		return Card{}, err
	}
	c, signer, err := Open(value)
	if err != nil {
		return Card{}, err
	}
	if signer != host {
		return Card{}, invalid("host", "card signed by %s is stored under %s", signer, host)
	}
	if c.ID != id {
		return Card{}, invalid("id", "is %s but the key names %s", wirecodec.Quote(c.ID), wirecodec.Quote(id))
	}
	return c, nil
}

// Select picks the valid value with the highest revision. Among values of
// the same revision it picks the latest LastSeenAt, which the publisher
// stamps on every republish (its heartbeat, see package discovery), so a
// fresh heartbeat replaces an old one in the DHT. Remaining ties go to the
// value with the greatest bytes, then to the lowest index, so the choice
// does not depend on the order of the values. It fails when no value is
// valid.
func (Validator) Select(key string, values [][]byte) (int, error) {
	best := -1
	var bestCard Card
	for i, v := range values {
		c, err := validateKeyed(key, v)
		if err != nil {
			continue
		}
		if best < 0 || better(c, v, bestCard, values[best]) {
			best, bestCard = i, c
		}
	}
	if best < 0 {
		return 0, invalid("key", "no valid card among %d values for %s", len(values), wirecodec.Quote(key))
	}
	return best, nil
}

// better reports whether card a (signed bytes va) beats card b (vb): higher
// revision, then later LastSeenAt, then greater bytes.
func better(a Card, va []byte, b Card, vb []byte) bool {
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	if a.LastSeenAt != b.LastSeenAt {
		return a.LastSeenAt > b.LastSeenAt
	}
	return bytes.Compare(va, vb) > 0
}
