package authority

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/wirecodec"
	"github.com/nova-node/nova-node/tiers"
)

// Domain is the libp2p signature domain of every authority record, distinct
// from the cards' so that no signature is replayed as the other kind.
const Domain = "nova-authority"

// Payload types of the records, one per kind. The signature covers the
// type, so a grant cannot be read as a revocation or the reverse.
const (
	grantType      = "/nova/grant/1"
	revocationType = "/nova/revocation/1"
	updateType     = "/nova/authority-update/1"
)

// Limits of a record, checked before and while parsing.
const (
	MaxRecordSize   = 8 << 10 // the signed envelope and its payload
	MaxSandboxes    = 32      // sandboxes a grant names
	MaxCapabilities = 64      // capability ids a grant names
	MaxKeysInUpdate = 16      // keys an update adds or removes
	maxReasonLen    = 256
)

// AnySandbox in a grant's or trust's sandboxes covers every sandbox (an
// admin's own nodes, a test swarm).
const AnySandbox = "*"

// CodeInvalidGrant is the error code of a grant, revocation or authority
// update that is refused: malformed, badly signed, from another swarm, or
// signed by a key that is not an admin.
const CodeInvalidGrant = "INVALID_GRANT"

// Codes of the security events a node records about the authority.
const (
	// CodeClaimNotGranted: a remote agent's tier or sandbox claim is held
	// lower than claimed, for lack of a grant or trust that covers it.
	CodeClaimNotGranted = "CLAIM_NOT_GRANTED"
	// CodeGrantRevoked: the node applied a revocation.
	CodeGrantRevoked = "GRANT_REVOKED"
)

// ErrInvalid matches every *InvalidError.
var ErrInvalid = errors.New("authority: invalid record")

// InvalidError is a refused authority record: what kind, and why.
type InvalidError struct {
	Kind   string // "grant", "revocation", "update" or "record"
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s refused: %s (%s)", e.Kind, e.Reason, CodeInvalidGrant)
}

// Code returns [CodeInvalidGrant].
func (e *InvalidError) Code() string { return CodeInvalidGrant }

// Is matches [ErrInvalid].
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(kind, format string, a ...any) error {
	return &InvalidError{Kind: kind, Reason: fmt.Sprintf(format, a...)}
}

// Grant says what one node's agents may be, signed by an admin of the
// swarm's authority.
type Grant struct {
	Authority peer.ID // the swarm's authority (its founding key)
	Serial    uint64  // unique within the authority; revocations name it
	Peer      peer.ID // the node granted
	// Agent is the agent id granted, or "" for every agent of Peer.
	Agent   string
	MaxTier tiers.Tier // the most privileged tier its agents may claim
	// Sandboxes the agents may be in; a claim of any other is not honoured.
	Sandboxes []string
	// Capabilities the agents may advertise as covered; nil covers all.
	Capabilities []string
	NotBefore    time.Time // zero: valid from the start
	Expires      time.Time // zero: no expiry
	// Issuer is the admin key that signed the grant: set by [OpenGrant],
	// ignored by [SealGrant] (the key decides).
	Issuer peer.ID
}

// Revocation cancels the grant with Serial, signed by an admin.
type Revocation struct {
	Authority peer.ID
	Serial    uint64
	Peer      peer.ID // the node whose grant it was, for the audit trail
	Reason    string
	At        time.Time
	Issuer    peer.ID // set by [OpenRevocation]
}

// Update is one entry of an authority's log: it adds or removes admin keys
// (never the founding key). Seq counts from 1; Prev is the [Hash] of the
// previous update as signed (zero for the first), so the log is a chain
// nobody can rewrite without an admin key. The signer must be an admin
// after the previous update.
type Update struct {
	Authority peer.ID
	Seq       uint64
	Prev      [32]byte
	Add       []peer.ID
	Remove    []peer.ID
	Issuer    peer.ID // set by [OpenUpdate]
}

// Hash returns the hash of a signed record, as updates chain them.
func Hash(signed []byte) [32]byte { return sha256.Sum256(signed) }

// wire forms: CBOR with integer keys, unknown keys refused (records are
// closed formats; a new field means a new payload type).
type grantWire struct {
	Authority    []byte   `cbor:"1,keyasint"`
	Serial       uint64   `cbor:"2,keyasint"`
	Peer         []byte   `cbor:"3,keyasint"`
	Agent        string   `cbor:"4,keyasint,omitempty"`
	MaxTier      uint8    `cbor:"5,keyasint"`
	Sandboxes    []string `cbor:"6,keyasint,omitempty"`
	Capabilities []string `cbor:"7,keyasint,omitempty"`
	AllCaps      bool     `cbor:"8,keyasint,omitempty"`
	NotBefore    int64    `cbor:"9,keyasint,omitempty"`
	Expires      int64    `cbor:"10,keyasint,omitempty"`
}

type revocationWire struct {
	Authority []byte `cbor:"1,keyasint"`
	Serial    uint64 `cbor:"2,keyasint"`
	Peer      []byte `cbor:"3,keyasint,omitempty"`
	Reason    string `cbor:"4,keyasint,omitempty"`
	At        int64  `cbor:"5,keyasint,omitempty"`
}

type updateWire struct {
	Authority []byte   `cbor:"1,keyasint"`
	Seq       uint64   `cbor:"2,keyasint"`
	Prev      []byte   `cbor:"3,keyasint,omitempty"`
	Add       [][]byte `cbor:"4,keyasint,omitempty"`
	Remove    [][]byte `cbor:"5,keyasint,omitempty"`
}

var decMode = wirecodec.NewDecMode(wirecodec.Limits{
	MaxNestedLevels: 4, MaxArrayElements: max(MaxCapabilities, MaxSandboxes, MaxKeysInUpdate), MaxMapPairs: 16,
	RejectUnknownFields: true,
})

// rec is the libp2p record of one kind: raw payload, typed by codec.
type rec struct {
	codec string
	data  []byte
}

func (r *rec) Domain() string                    { return Domain }
func (r *rec) Codec() []byte                     { return []byte(r.codec) }
func (r *rec) MarshalRecord() ([]byte, error)    { return r.data, nil }
func (r *rec) UnmarshalRecord(data []byte) error { r.data = data; return nil }

func seal(kind, codec string, v any, key crypto.PrivKey) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("authority: seal %s: nil private key", kind)
	}
	payload, err := wirecodec.EncMode().Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("authority: seal %s: %w", kind, err)
	}
	env, err := record.Seal(&rec{codec: codec, data: payload}, key)
	if err != nil {
		return nil, fmt.Errorf("authority: seal %s: %w", kind, err)
	}
	b, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("authority: seal %s: %w", kind, err)
	}
	if len(b) > MaxRecordSize {
		return nil, invalid(kind, "is %d bytes signed, more than %d", len(b), MaxRecordSize)
	}
	return b, nil
}

// open verifies a signed record of the given codec and decodes its payload
// into v; it returns the signer.
func open(kind, codec string, b []byte, v any) (peer.ID, error) {
	if len(b) > MaxRecordSize {
		return "", invalid(kind, "is %d bytes, more than %d", len(b), MaxRecordSize)
	}
	env, err := record.ConsumeTypedEnvelope(b, &rec{codec: codec})
	if err != nil {
		if env == nil {
			return "", invalid(kind, "malformed envelope: %v", err)
		}
		return "", invalid(kind, "signature does not verify: %v", err)
	}
	if string(env.PayloadType) != codec {
		return "", invalid(kind, "payload type is %s, want %q", wirecodec.Quote(string(env.PayloadType)), codec)
	}
	if err := decMode.Unmarshal(env.RawPayload, v); err != nil {
		return "", invalid(kind, "undecodable payload: %v", err)
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return "", invalid(kind, "unusable public key: %v", err)
	}
	return signer, nil
}

func peerBytes(p peer.ID) []byte { return []byte(p) }

func decodePeerBytes(kind, field string, b []byte) (peer.ID, error) {
	id, err := peer.IDFromBytes(b)
	if err != nil {
		return "", invalid(kind, "%s is not a peer ID: %v", field, err)
	}
	return id, nil
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// isEpoch reports whether t is set but encodes as 0 (the Unix epoch, to
// the second), which the wire reads as unset.
func isEpoch(t time.Time) bool { return !t.IsZero() && t.Unix() == 0 }

func timeOrZero(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// check returns the problem with g, a grant to seal or just opened.
func (g *Grant) check() error {
	switch {
	case g.Authority == "":
		return invalid("grant", "names no authority")
	case g.Peer == "":
		return invalid("grant", "names no peer")
	case g.Serial == 0:
		return invalid("grant", "serial 0 is reserved")
	case g.Agent != "" && !agentcard.ValidID(g.Agent):
		return invalid("grant", "agent %s is not a valid agent id", wirecodec.Quote(g.Agent))
	case !g.MaxTier.Valid():
		return invalid("grant", "max tier %d is not L0..L3", g.MaxTier)
	case len(g.Sandboxes) > MaxSandboxes:
		return invalid("grant", "names %d sandboxes, more than %d", len(g.Sandboxes), MaxSandboxes)
	case len(g.Capabilities) > MaxCapabilities:
		return invalid("grant", "names %d capabilities, more than %d", len(g.Capabilities), MaxCapabilities)
	case isEpoch(g.NotBefore) || isEpoch(g.Expires):
		return invalid("grant", "a bound at the Unix epoch (1970-01-01T00:00:00Z) reads as no bound on the wire; leave it zero or pick another instant")
	case !g.Expires.IsZero() && !g.NotBefore.IsZero() && !g.Expires.After(g.NotBefore):
		return invalid("grant", "expires (%s) before it is valid (%s)", g.Expires.Format(time.RFC3339), g.NotBefore.Format(time.RFC3339))
	}
	for _, s := range g.Sandboxes {
		if s != AnySandbox && !agentcard.ValidID(s) {
			return invalid("grant", "sandbox %s is not a valid name", wirecodec.Quote(s))
		}
	}
	for _, c := range g.Capabilities {
		if err := agentcard.CheckCapabilityID(c); err != nil {
			return invalid("grant", "capability %s: %v", wirecodec.Quote(c), err)
		}
	}
	return nil
}

// SealGrant signs g with an admin key. The result is what [OpenGrant]
// reads and what nodes present with their cards.
func SealGrant(g Grant, key crypto.PrivKey) ([]byte, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	w := grantWire{Authority: peerBytes(g.Authority), Serial: g.Serial, Peer: peerBytes(g.Peer), Agent: g.Agent,
		MaxTier: uint8(g.MaxTier), Sandboxes: g.Sandboxes, Capabilities: g.Capabilities, AllCaps: g.Capabilities == nil,
		NotBefore: unixOrZero(g.NotBefore), Expires: unixOrZero(g.Expires)}
	return seal("grant", grantType, &w, key)
}

// OpenGrant verifies and decodes a signed grant. Whether its signer is an
// admin of the right authority is the [Book]'s to decide.
func OpenGrant(b []byte) (Grant, error) {
	var w grantWire
	signer, err := open("grant", grantType, b, &w)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Serial: w.Serial, Agent: w.Agent, MaxTier: tiers.Tier(w.MaxTier), Sandboxes: w.Sandboxes,
		NotBefore: timeOrZero(w.NotBefore), Expires: timeOrZero(w.Expires), Issuer: signer}
	if g.Authority, err = decodePeerBytes("grant", "authority", w.Authority); err != nil {
		return Grant{}, err
	}
	if g.Peer, err = decodePeerBytes("grant", "peer", w.Peer); err != nil {
		return Grant{}, err
	}
	if !w.AllCaps {
		g.Capabilities = w.Capabilities
		if g.Capabilities == nil {
			g.Capabilities = []string{}
		}
	} else if len(w.Capabilities) > 0 {
		return Grant{}, invalid("grant", "lists capabilities and covers all of them")
	}
	if w.MaxTier > uint8(tiers.L3) {
		return Grant{}, invalid("grant", "max tier %d is not L0..L3", w.MaxTier)
	}
	if err := g.check(); err != nil {
		return Grant{}, err
	}
	return g, nil
}

// SealRevocation signs r with an admin key.
func SealRevocation(r Revocation, key crypto.PrivKey) ([]byte, error) {
	if r.Authority == "" || r.Serial == 0 {
		return nil, invalid("revocation", "names no authority or serial")
	}
	if len(r.Reason) > maxReasonLen {
		return nil, invalid("revocation", "reason is %d bytes, more than %d", len(r.Reason), maxReasonLen)
	}
	if isEpoch(r.At) {
		return nil, invalid("revocation", "a time at the Unix epoch (1970-01-01T00:00:00Z) reads as none on the wire; leave it zero or pick another instant")
	}
	w := revocationWire{Authority: peerBytes(r.Authority), Serial: r.Serial, Reason: r.Reason, At: unixOrZero(r.At)}
	if r.Peer != "" {
		w.Peer = peerBytes(r.Peer)
	}
	return seal("revocation", revocationType, &w, key)
}

// OpenRevocation verifies and decodes a signed revocation.
func OpenRevocation(b []byte) (Revocation, error) {
	var w revocationWire
	signer, err := open("revocation", revocationType, b, &w)
	if err != nil {
		return Revocation{}, err
	}
	r := Revocation{Serial: w.Serial, Reason: w.Reason, At: timeOrZero(w.At), Issuer: signer}
	if r.Authority, err = decodePeerBytes("revocation", "authority", w.Authority); err != nil {
		return Revocation{}, err
	}
	if w.Peer != nil {
		if r.Peer, err = decodePeerBytes("revocation", "peer", w.Peer); err != nil {
			return Revocation{}, err
		}
	}
	if r.Serial == 0 {
		return Revocation{}, invalid("revocation", "serial 0 is reserved")
	}
	if len(r.Reason) > maxReasonLen {
		return Revocation{}, invalid("revocation", "reason is %d bytes, more than %d", len(r.Reason), maxReasonLen)
	}
	return r, nil
}

// SealUpdate signs u with an admin key.
func SealUpdate(u Update, key crypto.PrivKey) ([]byte, error) {
	if err := u.check(); err != nil {
		return nil, err
	}
	w := updateWire{Authority: peerBytes(u.Authority), Seq: u.Seq}
	if u.Prev != ([32]byte{}) {
		w.Prev = u.Prev[:]
	}
	for _, p := range u.Add {
		w.Add = append(w.Add, peerBytes(p))
	}
	for _, p := range u.Remove {
		w.Remove = append(w.Remove, peerBytes(p))
	}
	return seal("update", updateType, &w, key)
}

// OpenUpdate verifies and decodes a signed authority update.
func OpenUpdate(b []byte) (Update, error) {
	var w updateWire
	signer, err := open("update", updateType, b, &w)
	if err != nil {
		return Update{}, err
	}
	u := Update{Seq: w.Seq, Issuer: signer}
	if u.Authority, err = decodePeerBytes("update", "authority", w.Authority); err != nil {
		return Update{}, err
	}
	switch len(w.Prev) {
	case 0:
	case 32:
		copy(u.Prev[:], w.Prev)
	default:
		return Update{}, invalid("update", "prev is %d bytes, want 32", len(w.Prev))
	}
	for _, b := range w.Add {
		p, err := decodePeerBytes("update", "add", b)
		if err != nil {
			return Update{}, err
		}
		u.Add = append(u.Add, p)
	}
	for _, b := range w.Remove {
		p, err := decodePeerBytes("update", "remove", b)
		if err != nil {
			return Update{}, err
		}
		u.Remove = append(u.Remove, p)
	}
	if err := u.check(); err != nil {
		return Update{}, err
	}
	return u, nil
}

func (u *Update) check() error {
	switch {
	case u.Authority == "":
		return invalid("update", "names no authority")
	case u.Seq == 0:
		return invalid("update", "seq 0 is reserved")
	case u.Seq == 1 && u.Prev != [32]byte{}:
		return invalid("update", "the first update has no previous one")
	case u.Seq > 1 && u.Prev == [32]byte{}:
		return invalid("update", "update %d names no previous update", u.Seq)
	case len(u.Add)+len(u.Remove) == 0:
		return invalid("update", "adds and removes nothing")
	case len(u.Add) > MaxKeysInUpdate || len(u.Remove) > MaxKeysInUpdate:
		return invalid("update", "changes more than %d keys", MaxKeysInUpdate)
	case slices.Contains(u.Remove, u.Authority):
		return invalid("update", "removes the founding key %s, which stays an admin", u.Authority)
	}
	for _, p := range append(slices.Clone(u.Add), u.Remove...) {
		if _, err := p.ExtractPublicKey(); err != nil {
			return invalid("update", "key %s has no public key inside (use Ed25519 keys): %v", p, err)
		}
	}
	return nil
}
