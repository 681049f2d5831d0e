package agentcard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// FuzzOpen feeds arbitrary bytes to the signed-card decoder. It must never
// panic; every rejection is an INVALID_CARD error; anything it accepts
// validates, is hosted by its signer and survives a JSON round trip. The
// seed corpus (testdata/fuzz/FuzzOpen) holds valid sealed cards and hostile
// variants; regenerate it with
// go test ./agentcard -run TestWriteFuzzCorpus -args -write-corpus.
func FuzzOpen(f *testing.F) {
	n := newNode(f, 1)
	sealed, err := agentcard.Seal(sampleCard("venus", "codegen.react"), n.key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, signer, err := agentcard.Open(data)
		if err != nil {
			if !errors.Is(err, agentcard.ErrInvalidCard) {
				t.Fatalf("rejection without INVALID_CARD: %T %v", err, err)
			}
			return
		}
		checkAccepted(t, c)
		if signer == "" || c.Host != signer.String() {
			t.Fatalf("accepted a card hosted by %q but signed by %q", c.Host, signer)
		}
	})
}

// FuzzOpenSignedPayload signs arbitrary payloads with a real key, so the
// fuzzer reaches the card decoder behind the signature check: a malicious
// node can sign anything it likes.
func FuzzOpenSignedPayload(f *testing.F) {
	n := newNode(f, 1)
	good := sampleCard("venus", "codegen.react")
	good.Host = n.id.String()
	goodJSON, _ := json.Marshal(good)
	f.Add(goodJSON)
	f.Add([]byte(`{"id":"a","name":"n","version":"1.0.0","tier":"L1","capabilities":[],"host":"` + n.id.String() + `"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		env, err := record.Seal(&rawRecord{payload}, n.key)
		if err != nil {
			t.Skip()
		}
		data, err := env.Marshal()
		if err != nil {
			t.Skip()
		}
		c, signer, err := agentcard.Open(data)
		if err != nil {
			if !errors.Is(err, agentcard.ErrInvalidCard) {
				t.Fatalf("rejection without INVALID_CARD: %T %v", err, err)
			}
			return
		}
		checkAccepted(t, c)
		if signer != n.id || c.Host != n.id.String() {
			t.Fatalf("accepted a card hosted by %q signed by %q", c.Host, signer)
		}
	})
}

type rawRecord struct{ payload []byte }

func (*rawRecord) Domain() string                   { return agentcard.PayloadDomain }
func (*rawRecord) Codec() []byte                    { return agentcard.PayloadType }
func (r *rawRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *rawRecord) UnmarshalRecord(b []byte) error { r.payload = b; return nil }

// FuzzCardJSON: decoding arbitrary JSON never panics and fails only with a
// syntax error or an INVALID_CARD error; a card that decodes and validates
// re-encodes to JSON that decodes to an equal card and encodes identically,
// and it can be sealed and opened.
func FuzzCardJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"sun","name":"SUN","version":"1.0.0","description":"","tier":0,"protocols":["a2a/1.0"],"endpoints":[{"transport":"local"}],"capabilities":[{"id":"plan","name":"Plan","description":"","inputSchema":{"type":"object"}}],"revision":1,"origin":"local","lastSeenAt":1}`,
		`{"id":"a","name":"n","version":"1.0.0-rc.1+b","tier":"L3","capabilities":[]}`,
		`{"id":"a","name":"n","version":"1.0.0","tier":2,"capabilities":[{"id":"x","outputSchema":{"a":[1,2,{"<":"\u2028"}]}}],"sandboxId":"s"}`,
		`{"id":"a","ID":"b"}`,
		`{"capabilities":null}`,
		`null`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	n := newNode(f, 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		var c agentcard.Card
		if err := json.Unmarshal(data, &c); err != nil {
			var syn *json.SyntaxError
			if !errors.Is(err, agentcard.ErrInvalidCard) && !errors.As(err, &syn) {
				t.Fatalf("decode error is neither a syntax error nor INVALID_CARD: %T %v", err, err)
			}
			return
		}
		// Differential check: what the strict decoder accepted decodes the
		// same with plain encoding/json.
		var p plainCard
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("strict decoder accepted what encoding/json rejects: %v", err)
		}
		if pc := p.card(); !reflect.DeepEqual(pc, c) {
			t.Fatalf("decoders disagree:\nstrict %#v\nplain  %#v", c, pc)
		}
		if c.Validate() != nil {
			return
		}
		checkAccepted(t, c)

		c.Host = n.id.String()
		if c.Validate() != nil {
			return // a host makes the card longer; it may now be too big
		}
		sealed, err := agentcard.Seal(c, n.key)
		if err != nil {
			t.Fatalf("Seal of a valid card: %v", err)
		}
		got, _, err := agentcard.Open(sealed)
		if err != nil || !got.Equal(c) {
			t.Fatalf("Open(Seal(c)) = %+v, %v", got, err)
		}
	})
}

// plainCard mirrors Card with no custom decoding.
type plainCard struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Description  string            `json:"description"`
	Tier         tiers.Tier        `json:"tier"`
	Protocols    []string          `json:"protocols"`
	Endpoints    []plainEndpoint   `json:"endpoints"`
	Capabilities []plainCapability `json:"capabilities"`
	Revision     uint64            `json:"revision"`
	SandboxID    string            `json:"sandboxId"`
	Origin       agentcard.Origin  `json:"origin"`
	LastSeenAt   int64             `json:"lastSeenAt"`
	Host         string            `json:"host"`
}

type plainEndpoint struct {
	Transport string `json:"transport"`
	Address   string `json:"address"`
}

type plainCapability struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func (p plainCard) card() agentcard.Card {
	c := agentcard.Card{
		ID: p.ID, Name: p.Name, Version: p.Version, Description: p.Description, Tier: p.Tier,
		Protocols: p.Protocols, Revision: p.Revision, SandboxID: p.SandboxID, Origin: p.Origin,
		LastSeenAt: p.LastSeenAt, Host: p.Host,
	}
	if p.Endpoints != nil {
		c.Endpoints = []agentcard.Endpoint{}
		for _, e := range p.Endpoints {
			c.Endpoints = append(c.Endpoints, agentcard.Endpoint(e))
		}
	}
	if p.Capabilities != nil {
		c.Capabilities = []agentcard.Capability{}
		for _, cp := range p.Capabilities {
			c.Capabilities = append(c.Capabilities, agentcard.Capability(cp))
		}
	}
	return c
}

// checkAccepted checks what must hold for any card a decoder accepted.
func checkAccepted(t *testing.T, c agentcard.Card) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("accepted card does not validate: %v", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("accepted card does not encode: %v", err)
	}
	var d agentcard.Card
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("re-encoded card does not decode: %v\n%s", err, b)
	}
	if !d.Equal(c) {
		t.Fatalf("JSON round trip changed the card:\n%+v\n%+v", c, d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("round-tripped card does not validate: %v", err)
	}
	b2, err := json.Marshal(d)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", b, b2)
	}
}
