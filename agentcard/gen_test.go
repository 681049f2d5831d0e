package agentcard_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// Test helpers shared by this package's tests: deterministic node keys, a
// fake clock and rapid generators of valid cards.

// node is a test node identity.
type node struct {
	key crypto.PrivKey
	id  peer.ID
}

// seededReader is a deterministic byte stream for key generation.
type seededReader struct{ r *rand.ChaCha8 }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// newNode returns the Ed25519 identity derived from seed.
func newNode(tb testing.TB, seed byte) node {
	tb.Helper()
	var s [32]byte
	s[0] = seed
	return nodeFrom(tb, s)
}

// nodeFrom returns the Ed25519 identity derived from seed.
func nodeFrom(tb testing.TB, seed [32]byte) node {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(seededReader{rand.NewChaCha8(seed)})
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return node{key: key, id: id}
}

var (
	nodesOnce sync.Once
	nodesVal  []node
)

// testNodes returns 8 fixed identities; tests use nodes[0] as "self".
func testNodes(tb testing.TB) []node {
	nodesOnce.Do(func() {
		for i := range 8 {
			nodesVal = append(nodesVal, newNode(tb, byte(i+1)))
		}
	})
	return nodesVal
}

// fakeClock is an injectable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Generators. Everything they produce passes Validate.

func genAgentID() *rapid.Generator[string] {
	return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9_.-]{0,20}`)
}

func genCapabilityID() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"codegen.react", "schema.design", "review", "mcp:tools/list", "a-b_c.d"}),
		rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9_.:/-]{0,30}`),
	)
}

func genVersion() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		v := fmt.Sprintf("%d.%d.%d", rapid.IntRange(0, 20).Draw(t, "major"),
			rapid.IntRange(0, 99).Draw(t, "minor"), rapid.IntRange(0, 999).Draw(t, "patch"))
		if rapid.Bool().Draw(t, "pre") {
			v += "-" + rapid.SampledFrom([]string{"alpha", "rc.1", "beta.2.x-y", "0.3"}).Draw(t, "preID")
		}
		if rapid.Bool().Draw(t, "build") {
			v += "+" + rapid.SampledFrom([]string{"001", "sha.5114f85", "exp-1"}).Draw(t, "buildID")
		}
		return v
	})
}

// genText draws human text: printable ASCII or arbitrary Unicode.
func genText(minRunes, maxRunes int) *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(fmt.Sprintf(`[ -~]{%d,%d}`, minRunes, min(maxRunes, 40))),
		rapid.StringN(minRunes, maxRunes, -1),
	)
}

// genSchema draws an optional JSON schema in compact form.
func genSchema() *rapid.Generator[json.RawMessage] {
	return rapid.Custom(func(t *rapid.T) json.RawMessage {
		switch rapid.IntRange(0, 3).Draw(t, "schemaKind") {
		case 0:
			return nil
		case 1:
			return json.RawMessage(rapid.SampledFrom([]string{
				`{"type":"object"}`, `true`, `{"type":"string","maxLength":10}`, `null`,
				`{"type":"array","items":{"type":"number"}}`,
			}).Draw(t, "schema"))
		default:
			props := rapid.MapOfN(rapid.StringN(1, 8, -1), rapid.SampledFrom([]string{"string", "number", "boolean"}), 0, 4).Draw(t, "props")
			m := map[string]any{"type": "object", "properties": map[string]any{}}
			for k, typ := range props {
				m["properties"].(map[string]any)[k] = map[string]string{"type": typ}
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	})
}

func genCapabilities() *rapid.Generator[[]agentcard.Capability] {
	return rapid.Custom(func(t *rapid.T) []agentcard.Capability {
		ids := rapid.SliceOfNDistinct(genCapabilityID(), 0, 5, rapid.ID).Draw(t, "capIDs")
		caps := make([]agentcard.Capability, len(ids))
		for i, id := range ids {
			caps[i] = agentcard.Capability{
				ID:           id,
				Name:         genText(0, 30).Draw(t, "capName"),
				Description:  genText(0, 60).Draw(t, "capDescription"),
				InputSchema:  genSchema().Draw(t, "inputSchema"),
				OutputSchema: genSchema().Draw(t, "outputSchema"),
			}
		}
		return caps
	})
}

func genEndpoints() *rapid.Generator[[]agentcard.Endpoint] {
	ep := rapid.Custom(func(t *rapid.T) agentcard.Endpoint {
		switch rapid.SampledFrom([]string{"local", "libp2p", "websocket"}).Draw(t, "transport") {
		case "local":
			return agentcard.Endpoint{Transport: "local"}
		case "libp2p":
			return agentcard.Endpoint{Transport: "libp2p", Address: "/ip4/127.0.0.1/tcp/4001"}
		default:
			return agentcard.Endpoint{Transport: "websocket", Address: genText(0, 40).Draw(t, "url")}
		}
	})
	return rapid.OneOf(rapid.Just[[]agentcard.Endpoint](nil), rapid.SliceOfN(ep, 0, 3))
}

// cardSpec says which host and origin a generated card may carry.
type cardSpec struct {
	hosts   []string // candidates for Host; empty means Host is ""
	origins []agentcard.Origin
}

// genCardWith draws a valid card whose Host is one of spec.hosts.
func genCardWith(spec cardSpec) *rapid.Generator[agentcard.Card] {
	return rapid.Custom(func(t *rapid.T) agentcard.Card {
		c := agentcard.Card{
			ID:           genAgentID().Draw(t, "id"),
			Name:         genText(1, 40).Draw(t, "name"),
			Version:      genVersion().Draw(t, "version"),
			Description:  genText(0, 80).Draw(t, "description"),
			Tier:         tiers.Tier(rapid.IntRange(0, 3).Draw(t, "tier")),
			Protocols:    rapid.OneOf(rapid.Just[[]string](nil), rapid.SliceOfN(rapid.SampledFrom([]string{"a2a/1.0", "mcp/2024-11-05", "/nova/a2a/1.0.0"}), 0, 3)).Draw(t, "protocols"),
			Endpoints:    genEndpoints().Draw(t, "endpoints"),
			Capabilities: genCapabilities().Draw(t, "capabilities"),
			Revision:     rapid.Uint64Range(0, 1<<40).Draw(t, "revision"),
			SandboxID:    rapid.SampledFrom([]string{"", "", "sandbox-a", "sandbox-b"}).Draw(t, "sandbox"),
			LastSeenAt:   rapid.Int64Range(0, 1<<42).Draw(t, "lastSeenAt"),
		}
		if len(spec.hosts) > 0 {
			c.Host = rapid.SampledFrom(spec.hosts).Draw(t, "host")
		}
		if len(spec.origins) > 0 {
			c.Origin = rapid.SampledFrom(spec.origins).Draw(t, "origin")
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("generator made an invalid card: %v", err)
		}
		return c
	})
}

// genCard draws a valid card with no host and any origin.
func genCard() *rapid.Generator[agentcard.Card] {
	return genCardWith(cardSpec{origins: []agentcard.Origin{"", agentcard.OriginLocal, agentcard.OriginRemote}})
}

// peerStrings returns the string forms of the given nodes' peer IDs.
func peerStrings(ns []node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.id.String()
	}
	return out
}

// sampleCard is a fixed valid card for table tests.
func sampleCard(id string, caps ...string) agentcard.Card {
	c := agentcard.Card{
		ID:           id,
		Name:         id,
		Version:      "1.0.0",
		Description:  "test agent " + id,
		Tier:         tiers.L2,
		Protocols:    []string{"a2a/1.0"},
		Endpoints:    []agentcard.Endpoint{{Transport: "local"}},
		Capabilities: []agentcard.Capability{},
	}
	for _, cp := range caps {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp, Name: cp})
	}
	return c
}
