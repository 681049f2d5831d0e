package invite

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Prefix starts every token of this format: "nova", then the format
// version "1". The base32 text that follows never contains '1', so the
// prefix is unambiguous.
const Prefix = "nova1"

// Limits of a token, checked before anything is decoded.
const (
	MaxTokenLen = 8192 // characters of an encoded token, whitespace included
	MaxAddrs    = 32   // bootstrap addresses, and relay addresses
	MaxAddrLen  = 512  // bytes of one multiaddr
	SecretLen   = 32   // bytes of a swarm secret
	// MaxAuthorityLen bounds the authority's peer ID (binary multihash
	// form: 38 bytes for an Ed25519 key's).
	MaxAuthorityLen = 64
	// MaxIdentityLen bounds the joiner's private key (libp2p protobuf
	// form: 68 bytes for Ed25519).
	MaxIdentityLen = 128
	// MaxGrantLen bounds the joiner's signed grant.
	MaxGrantLen = 4096
	checksumLen = 4
)

// Errors of Decode and Validate. Every error of this package matches
// exactly one of them with errors.Is, and says what is wrong in its text.
var (
	// ErrBadPrefix: the text does not start with "nova1", or names a
	// version this build does not read.
	ErrBadPrefix = errors.New("invite: not a nova invite token")
	// ErrBadChecksum: the text is not base32, or its checksum does not
	// match: a typo, or a token cut short when copied.
	ErrBadChecksum = errors.New("invite: token damaged (checksum mismatch: a typo, or cut short?)")
	// ErrMalformed: the checksum matches but the content does not decode,
	// or is not in canonical form.
	ErrMalformed = errors.New("invite: malformed token")
	// ErrInvalid: a field breaks a rule: swarm name, secret length, a bad
	// or incomplete multiaddr, too many addresses, or a token too long.
	ErrInvalid = errors.New("invite: invalid token")
)

// Token is what a newcomer needs to join a swarm: its name, its secret
// (none, or exactly 32 bytes), and multiaddrs of members to dial and of
// relays, each ending in /p2p/<peerID>. Decode gives nil, not empty,
// slices for absent fields.
//
// A swarm with an authority adds its peer ID (Authority), and an admin's
// invite may carry an identity made for the joiner (Identity, its private
// key) with a grant for that identity (Grant), so that the joiner's agents
// count at the granted tier from the start. This package checks their
// sizes and that they come together; the node checks their content (a
// peer ID, an Ed25519 key, a grant for that key's peer).
type Token struct {
	Swarm     string
	Secret    []byte
	Bootstrap []string
	Relays    []string
	// Authority is the binary peer ID of the swarm's authority.
	Authority []byte
	// Identity is a libp2p-marshalled Ed25519 private key for the joiner:
	// the token is then as secret as that key.
	Identity []byte
	// Grant is the signed grant for Identity's peer.
	Grant []byte
}

// wire is the CBOR form: a map with small integer keys, core deterministic
// encoding, absent fields omitted.
type wire struct {
	Swarm     string   `cbor:"1,keyasint"`
	Secret    []byte   `cbor:"2,keyasint,omitempty"`
	Bootstrap []string `cbor:"3,keyasint,omitempty"`
	Relays    []string `cbor:"4,keyasint,omitempty"`
	Authority []byte   `cbor:"5,keyasint,omitempty"`
	Identity  []byte   `cbor:"6,keyasint,omitempty"`
	Grant     []byte   `cbor:"7,keyasint,omitempty"`
}

var (
	enc = wirecodec.EncMode()
	// dec is the hardened decoder with a token's limits: it nests two
	// levels, its arrays are the address lists, and a token is a closed
	// format (an unknown key is an error).
	dec = wirecodec.NewDecMode(wirecodec.Limits{
		MaxNestedLevels:     4,
		MaxArrayElements:    MaxAddrs,
		MaxMapPairs:         16,
		RejectUnknownFields: true,
	})
	b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
)

// SwarmPattern is the rule of a swarm name, whose one home is here (the
// lowest package that the node's config, discovery and invites all
// import): lower-case letters, digits and '-', starting with a letter or
// digit, at most 63 characters, so that it is a safe segment of topics,
// DHT keys and the mDNS service name.
const SwarmPattern = `^[a-z0-9][a-z0-9-]{0,62}$`

var swarmRe = regexp.MustCompile(SwarmPattern)

// ValidSwarm reports whether name is a valid swarm name ([SwarmPattern]).
func ValidSwarm(name string) bool { return swarmRe.MatchString(name) }

// GenerateSecret returns a new random 32-byte swarm secret.
func GenerateSecret() ([]byte, error) {
	s := make([]byte, SecretLen)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("invite: generate secret: %w", err)
	}
	return s, nil
}

// Validate checks every field: the swarm name (lower-case letters, digits
// and '-', at most 63), the secret (absent or 32 bytes), and at most
// [MaxAddrs] bootstrap and relay addresses, each a multiaddr of the
// supported protocols (see the package doc) ending in /p2p/<peerID>; the
// authority, identity and grant within their limits, identity and grant
// together, and both only with an authority. Errors match [ErrInvalid]
// and name the field.
func (t Token) Validate() error {
	if !ValidSwarm(t.Swarm) {
		return fmt.Errorf("%w: swarm %.80q must be lower-case letters, digits and '-', at most 63", ErrInvalid, t.Swarm)
	}
	if len(t.Secret) != 0 && len(t.Secret) != SecretLen {
		return fmt.Errorf("%w: secret is %d bytes; a swarm secret is %d bytes, or absent", ErrInvalid, len(t.Secret), SecretLen)
	}
	for _, f := range []struct {
		name  string
		addrs []string
	}{{"bootstrap", t.Bootstrap}, {"relays", t.Relays}} {
		if len(f.addrs) > MaxAddrs {
			return fmt.Errorf("%w: %d %s addresses, at most %d", ErrInvalid, len(f.addrs), f.name, MaxAddrs)
		}
		for i, a := range f.addrs {
			if err := checkAddr(a); err != nil {
				return fmt.Errorf("%w: %s[%d]: %v", ErrInvalid, f.name, i, err)
			}
		}
	}
	for _, f := range []struct {
		name string
		b    []byte
		max  int
	}{{"authority", t.Authority, MaxAuthorityLen}, {"identity", t.Identity, MaxIdentityLen}, {"grant", t.Grant, MaxGrantLen}} {
		if len(f.b) > f.max {
			return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, f.name, len(f.b), f.max)
		}
	}
	if (len(t.Identity) == 0) != (len(t.Grant) == 0) {
		return fmt.Errorf("%w: identity and grant come together: a token has both or neither", ErrInvalid)
	}
	if len(t.Identity) > 0 && len(t.Authority) == 0 {
		return fmt.Errorf("%w: identity and grant without an authority", ErrInvalid)
	}
	return nil
}

// Encode validates t and returns it as a token: [Prefix], then lower-case
// base32 (RFC 4648 alphabet, no padding) of the CBOR-encoded fields
// followed by a 4-byte checksum (the first bytes of SHA-256 over the
// prefix and the CBOR bytes). Equal tokens encode to the same string.
func (t Token) Encode() (string, error) {
	if err := t.Validate(); err != nil {
		return "", err
	}
	payload, err := enc.Marshal(wire(t))
	if err != nil {
		return "", fmt.Errorf("invite: encode: %w", err)
	}
	s := Prefix + b32.EncodeToString(append(payload, checksum(payload)...))
	if len(s) > MaxTokenLen {
		return "", fmt.Errorf("%w: token would be %d characters, more than %d", ErrInvalid, len(s), MaxTokenLen)
	}
	return s, nil
}

func checksum(payload []byte) []byte {
	h := sha256.New()
	h.Write([]byte(Prefix))
	h.Write(payload)
	return h.Sum(nil)[:checksumLen]
}

// Decode reads a token made by [Token.Encode]. It ignores whitespace
// anywhere (a token wrapped across lines still decodes) and letter case.
// In order it checks the length ([MaxTokenLen]), the prefix
// ([ErrBadPrefix]), the base32 text and the checksum ([ErrBadChecksum]),
// the CBOR content, which must be canonical ([ErrMalformed]), and the
// fields ([Token.Validate], [ErrInvalid]).
func Decode(s string) (Token, error) {
	if len(s) > MaxTokenLen {
		return Token{}, fmt.Errorf("%w: %d characters, more than %d", ErrInvalid, len(s), MaxTokenLen)
	}
	s = strings.ToLower(strings.Join(strings.Fields(s), ""))
	body, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		if v, ok := strings.CutPrefix(s, "nova"); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
			return Token{}, fmt.Errorf("%w: format version %q is not supported (this build reads %q)", ErrBadPrefix, v[:1], Prefix)
		}
		return Token{}, fmt.Errorf("%w: it must start with %q", ErrBadPrefix, Prefix)
	}
	if i := strings.IndexFunc(body, func(r rune) bool { return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz234567", r) }); i >= 0 {
		return Token{}, fmt.Errorf("%w: character %q at position %d is not base32", ErrBadChecksum, body[i:i+1], len(Prefix)+i)
	}
	raw, err := b32.DecodeString(body)
	if err != nil || len(raw) <= checksumLen || b32.EncodeToString(raw) != body {
		// The last check refuses a final character whose unused low bits
		// are set: another spelling of the same bytes, so a typo there.
		return Token{}, fmt.Errorf("%w: %d characters of base32 is not a whole token", ErrBadChecksum, len(body))
	}
	payload, sum := raw[:len(raw)-checksumLen], raw[len(raw)-checksumLen:]
	if !bytes.Equal(sum, checksum(payload)) {
		return Token{}, ErrBadChecksum
	}
	var w wire
	if err := dec.Unmarshal(payload, &w); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	again, err := enc.Marshal(w)
	if err != nil || !bytes.Equal(again, payload) {
		return Token{}, fmt.Errorf("%w: not in canonical form", ErrMalformed)
	}
	t := Token(w)
	for _, b := range []*[]byte{&t.Secret, &t.Authority, &t.Identity, &t.Grant} {
		if len(*b) == 0 {
			*b = nil
		}
	}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// Equal reports whether t and o carry the same fields, nil and empty
// slices being equal.
func (t Token) Equal(o Token) bool {
	return t.Swarm == o.Swarm && bytes.Equal(t.Secret, o.Secret) &&
		slices.Equal(t.Bootstrap, o.Bootstrap) && slices.Equal(t.Relays, o.Relays) &&
		bytes.Equal(t.Authority, o.Authority) && bytes.Equal(t.Identity, o.Identity) && bytes.Equal(t.Grant, o.Grant)
}
