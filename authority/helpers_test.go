package authority_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/tiers"
)

// Test helpers shared by this package's tests: deterministic identities, a
// fake clock, cards, and records signed without the sealers' checks.

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// ident is a node's or an admin's key pair.
type ident struct {
	key crypto.PrivKey
	id  peer.ID
}

type seededReader struct{ r *rand.ChaCha8 }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// identFrom returns the Ed25519 identity derived from seed.
func identFrom(t tb, seed uint64) ident {
	t.Helper()
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	s[8] = 0xa5 // keep these keys apart from other packages' test keys
	key, _, err := crypto.GenerateEd25519Key(seededReader{rand.NewChaCha8(s)})
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatalf("peer id: %v", err)
	}
	return ident{key: key, id: id}
}

// t0 is the tests' "now": whole seconds, as records carry them.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is an injectable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// card returns a remote card of agent id hosted by host, claiming tier and
// sandbox.
func card(id string, host peer.ID, tier tiers.Tier, sandbox string, caps ...string) agentcard.Card {
	c := agentcard.Card{
		ID: id, Name: id, Version: "1.0.0", Description: "test agent " + id,
		Tier: tier, SandboxID: sandbox,
		Protocols: []string{"a2a/1.0"}, Endpoints: []agentcard.Endpoint{{Transport: "local"}},
		Capabilities: []agentcard.Capability{},
		Origin:       agentcard.OriginRemote, Host: host.String(),
	}
	for _, cp := range caps {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp, Name: cp})
	}
	return c
}

func mustSealGrant(t tb, g authority.Grant, k ident) []byte {
	t.Helper()
	b, err := authority.SealGrant(g, k.key)
	if err != nil {
		t.Fatalf("SealGrant: %v", err)
	}
	return b
}

func mustAddGrant(t tb, b *authority.Book, signed []byte) {
	t.Helper()
	if _, _, err := b.AddGrant(signed); err != nil {
		t.Fatalf("AddGrant: %v", err)
	}
}

func mustSealRevocation(t tb, r authority.Revocation, k ident) []byte {
	t.Helper()
	b, err := authority.SealRevocation(r, k.key)
	if err != nil {
		t.Fatalf("SealRevocation: %v", err)
	}
	return b
}

// nextUpdate signs the update that follows b's log, adding add and
// removing remove, with k.
func nextUpdate(t tb, b *authority.Book, k ident, add, remove []peer.ID) []byte {
	t.Helper()
	n, head := b.Head()
	s, err := authority.SealUpdate(authority.Update{Authority: b.Authority(), Seq: n + 1, Prev: head, Add: add, Remove: remove}, k.key)
	if err != nil {
		t.Fatalf("SealUpdate: %v", err)
	}
	return s
}

func mustUpdate(t tb, b *authority.Book, k ident, add, remove []peer.ID) []byte {
	t.Helper()
	s := nextUpdate(t, b, k, add, remove)
	if changed, err := b.AddUpdate(s); err != nil || !changed {
		t.Fatalf("AddUpdate = %v, %v; want applied", changed, err)
	}
	return s
}

// rawRecord is a libp2p record of any payload type, for signing payloads
// that the sealers would refuse.
type rawRecord struct {
	codec string
	data  []byte
}

func (r *rawRecord) Domain() string                    { return authority.Domain }
func (r *rawRecord) Codec() []byte                     { return []byte(r.codec) }
func (r *rawRecord) MarshalRecord() ([]byte, error)    { return r.data, nil }
func (r *rawRecord) UnmarshalRecord(data []byte) error { r.data = data; return nil }

// sealRaw signs payload v (encoded as CBOR) as a record of payload type
// codec, bypassing every check of the sealers.
func sealRaw(t tb, codec string, v any, k ident) []byte {
	t.Helper()
	payload, err := cbor.Marshal(v)
	if err != nil {
		t.Fatalf("cbor: %v", err)
	}
	env, err := record.Seal(&rawRecord{codec: codec, data: payload}, k.key)
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// checkInvalid fails unless err is an *authority.InvalidError of kind,
// whose message carries the code and contains each of want.
func checkInvalid(t tb, err error, kind string, want ...string) {
	t.Helper()
	var ie *authority.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v (%T), want *authority.InvalidError", err, err)
	}
	if !errors.Is(err, authority.ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
	}
	if ie.Code() != authority.CodeInvalidGrant || !strings.Contains(err.Error(), "INVALID_GRANT") {
		t.Fatalf("err %q: code %q, want %s in code and message", err, ie.Code(), authority.CodeInvalidGrant)
	}
	if kind != "" && ie.Kind != kind {
		t.Fatalf("err %q: kind %q, want %q", err, ie.Kind, kind)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err %q does not say %q", err, w)
		}
	}
}
