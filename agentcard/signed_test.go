package agentcard_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
)

func TestSealOpenRoundTrip(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(key)
	c := sampleCard("venus", "codegen.react")
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"object","description":"<b>&</b>"}`)
	c.Revision = 4

	data, err := agentcard.Seal(c, key)
	if err != nil {
		t.Fatal(err)
	}
	got, signer, err := agentcard.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	want := c.Clone()
	want.Host = id.String()
	if signer != id || !got.Equal(want) {
		t.Fatalf("Open = %+v signed by %s, want %+v by %s", got, signer, want, id)
	}

	// The record type is registered: ConsumeEnvelope finds it.
	_, rec, err := record.ConsumeEnvelope(data, agentcard.PayloadDomain)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := rec.(*agentcard.Record); !ok || !r.Card.Equal(want) {
		t.Fatalf("ConsumeEnvelope gave %T %+v", rec, rec)
	}
}

// Signing then opening any valid card gives the same card back.
func TestSealOpenProperty(t *testing.T) {
	nodes := testNodes(t)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.SampledFrom(nodes).Draw(t, "node")
		c := genCardWith(cardSpec{hosts: []string{"", n.id.String()}, origins: []agentcard.Origin{"", "local"}}).Draw(t, "card")
		data, err := agentcard.Seal(c, n.key)
		if err != nil {
			t.Fatal(err)
		}
		got, signer, err := agentcard.Open(data)
		if err != nil {
			t.Fatal(err)
		}
		c.Host = n.id.String()
		if signer != n.id || !got.Equal(c) {
			t.Fatalf("Open = %+v by %s", got, signer)
		}
	})
}

func TestSealRejects(t *testing.T) {
	nodes := testNodes(t)
	c := sampleCard("venus")
	c.Host = nodes[2].id.String()
	_, err := agentcard.Seal(c, nodes[1].key)
	var ice *agentcard.InvalidCardError
	if !errors.As(err, &ice) || !ice.HasField("host") {
		t.Fatalf("Seal of a card naming another host = %v", err)
	}
	bad := sampleCard("")
	if _, err := agentcard.Seal(bad, nodes[1].key); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("Seal of an invalid card = %v", err)
	}
	if _, err := agentcard.Seal(sampleCard("venus"), nil); err == nil {
		t.Fatal("Seal with a nil key succeeded")
	}
}

// otherRecord is a record with a configurable domain and payload type.
type otherRecord struct {
	domain, codec string
	payload       []byte
}

func (r *otherRecord) Domain() string                 { return r.domain }
func (r *otherRecord) Codec() []byte                  { return []byte(r.codec) }
func (r *otherRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *otherRecord) UnmarshalRecord([]byte) error   { return nil }

func seal(t *testing.T, rec record.Record, key crypto.PrivKey) []byte {
	t.Helper()
	env, err := record.Seal(rec, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestOpenRejects(t *testing.T) {
	nodes := testNodes(t)
	a, b := nodes[1], nodes[2]
	good := sampleCard("venus")
	good.Host = a.id.String()
	goodJSON, _ := json.Marshal(good)
	sealed, err := agentcard.Seal(good, a.key)
	if err != nil {
		t.Fatal(err)
	}

	hostB := good.Clone()
	hostB.Host = b.id.String()
	noHost := good.Clone()
	noHost.Host = ""
	invalidCard := good.Clone()
	invalidCard.Version = "one"
	big := good.Clone()
	big.Description = strings.Repeat("x", agentcard.MaxSignedCardSize)

	tamperedPayload := bytes.Clone(sealed)
	i := bytes.Index(tamperedPayload, []byte(`"description":"test agent venus"`))
	tamperedPayload[i+len(`"description":"`)] = 'T'
	tamperedSig := bytes.Clone(sealed)
	tamperedSig[len(tamperedSig)-1] ^= 1

	// Signed by the right key, but the tier is missing, null or unknown:
	// never read as L0.
	tierKey := regexp.MustCompile(`"tier":[0-9],`)
	if !tierKey.Match(goodJSON) {
		t.Fatalf("no tier in %s", goodJSON)
	}
	withTier := func(repl string) []byte {
		return seal(t, &otherRecord{agentcard.PayloadDomain, "/nova/agentcard/1", tierKey.ReplaceAll(goodJSON, []byte(repl))}, a.key)
	}

	tests := []struct {
		name  string
		data  []byte
		field string
	}{
		{"signed by A, naming host B", seal(t, &agentcard.Record{Card: hostB}, a.key), "host"},
		{"signed, naming no host", seal(t, &agentcard.Record{Card: noHost}, a.key), "host"},
		{"tampered payload", tamperedPayload, "signature"},
		{"tampered signature", tamperedSig, "signature"},
		{"wrong payload type", seal(t, &otherRecord{agentcard.PayloadDomain, "/libp2p/routing-state-record", goodJSON}, a.key), "payloadType"},
		{"wrong domain", seal(t, &otherRecord{"libp2p-routing-state", "/nova/agentcard/1", goodJSON}, a.key), "signature"},
		{"invalid card", seal(t, &agentcard.Record{Card: invalidCard}, a.key), "version"},
		{"payload without tier", withTier(""), "tier"},
		{"payload with null tier", withTier(`"tier":null,`), "tier"},
		{"payload with unknown tier", withTier(`"tier":"L4",`), "tier"},
		{"payload not json", seal(t, &otherRecord{agentcard.PayloadDomain, "/nova/agentcard/1", []byte("hello")}, a.key), "card"},
		{"payload null", seal(t, &otherRecord{agentcard.PayloadDomain, "/nova/agentcard/1", []byte("null")}, a.key), "card"},
		{"oversized signed card", seal(t, &agentcard.Record{Card: big}, a.key), "envelope"},
		{"oversized garbage", bytes.Repeat([]byte{0xff}, agentcard.MaxSignedCardSize+1), "envelope"},
		{"truncated", sealed[:len(sealed)/2], "envelope"},
		{"empty", nil, "envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, signer, err := agentcard.Open(tt.data)
			var ice *agentcard.InvalidCardError
			if !errors.As(err, &ice) || !ice.HasField(tt.field) {
				t.Fatalf("Open = %v, want a problem on %q", err, tt.field)
			}
			if !errors.Is(err, agentcard.ErrInvalidCard) || ice.Code() != agentcard.CodeInvalidCard {
				t.Fatalf("error %v does not carry INVALID_CARD", err)
			}
			if signer != "" || c.ID != "" {
				t.Fatalf("Open returned data with an error: %q %q", c.ID, signer)
			}
		})
	}
}

func TestOpenSizeCheckedBeforeParsing(t *testing.T) {
	// A valid envelope followed by padding is still refused by size alone:
	// the message reports the length, not a parse error.
	n := testNodes(t)[1]
	sealed, err := agentcard.Seal(sampleCard("venus"), n.key)
	if err != nil {
		t.Fatal(err)
	}
	data := append(bytes.Clone(sealed), make([]byte, agentcard.MaxSignedCardSize)...)
	_, _, err = agentcard.Open(data)
	if err == nil || !strings.Contains(err.Error(), "more than 65536") {
		t.Fatalf("Open = %v", err)
	}
}

func TestSealLargestValidCard(t *testing.T) {
	// A card just under MaxCardSize seals within MaxSignedCardSize and opens.
	n := testNodes(t)[1]
	c := sampleCard("venus")
	c.Host = n.id.String()
	for i := 0; ; i++ {
		next := c.Clone()
		next.Capabilities = append(next.Capabilities, agentcard.Capability{ID: "c" + strings.Repeat("x", i%100) + string(rune('a'+i/100)), Description: strings.Repeat("d", 4000)})
		if next.Validate() != nil {
			break
		}
		c = next
	}
	for len(c.Description) < 4096 {
		next := c.Clone()
		next.Description += strings.Repeat("e", 64)
		if next.Validate() != nil {
			break
		}
		c = next
	}
	b, _ := json.Marshal(c)
	if len(b) < agentcard.MaxCardSize-200 {
		t.Fatalf("test card is only %d bytes", len(b))
	}
	data, err := agentcard.Seal(c, n.key)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > agentcard.MaxSignedCardSize {
		t.Fatalf("sealed %d bytes", len(data))
	}
	if _, _, err := agentcard.Open(data); err != nil {
		t.Fatal(err)
	}
}

func TestRecordUnmarshalStrict(t *testing.T) {
	var r agentcard.Record
	for _, in := range []string{`{"id":"a"} x`, `{"id":"a","id":"a"}`, `[]`, ``, strings.Repeat(" ", agentcard.MaxSignedCardSize+1)} {
		if err := r.UnmarshalRecord([]byte(in)); !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("UnmarshalRecord(%.20q) = %v", in, err)
		}
	}
	if (&r).Domain() != agentcard.PayloadDomain || string(r.Codec()) != "/nova/agentcard/1" {
		t.Fatal("wrong domain or codec")
	}
}

func TestDHTValidator(t *testing.T) {
	nodes := testNodes(t)
	a, b := nodes[1], nodes[2]
	sealAt := func(n node, id string, rev uint64, desc string) []byte {
		c := sampleCard(id)
		c.Revision = rev
		c.Description = desc
		data, err := agentcard.Seal(c, n.key)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	key := agentcard.Key(a.id, "venus")
	if key != "/nova/card/"+a.id.String()+"/venus" {
		t.Fatalf("Key = %q", key)
	}
	if h, id, err := agentcard.ParseKey(key); err != nil || h != a.id || id != "venus" {
		t.Fatalf("ParseKey = %s %s %v", h, id, err)
	}
	for _, bad := range []string{"/nova/other/x/y", "/nova/card/" + a.id.String(), "/nova/card/nope/venus", "/nova/card/" + a.id.String() + "/ve/nus"} {
		if _, _, err := agentcard.ParseKey(bad); !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("ParseKey(%q) = %v", bad, err)
		}
	}

	var v agentcard.Validator
	v1, v2, v3 := sealAt(a, "venus", 1, "one"), sealAt(a, "venus", 2, "two"), sealAt(a, "venus", 2, "also two")
	if err := v.Validate(key, v1); err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(key, sealAt(b, "venus", 1, "x")); err == nil {
		t.Fatal("a card signed by another peer validates under a's key")
	}
	if err := v.Validate(key, sealAt(a, "mars", 1, "x")); err == nil {
		t.Fatal("a card for another agent validates under venus's key")
	}
	if err := v.Validate(key, []byte("junk")); err == nil {
		t.Fatal("junk validates")
	}

	i, err := v.Select(key, [][]byte{v1, []byte("junk"), v2})
	if err != nil || i != 2 {
		t.Fatalf("Select = %d, %v; want 2", i, err)
	}
	// Ties are broken the same way whatever the order.
	i1, _ := v.Select(key, [][]byte{v2, v3})
	i2, _ := v.Select(key, [][]byte{v3, v2})
	if [][]byte{v2, v3}[i1] == nil || !bytes.Equal([][]byte{v2, v3}[i1], [][]byte{v3, v2}[i2]) {
		t.Fatalf("Select is not stable: %d vs %d", i1, i2)
	}
	if _, err := v.Select(key, [][]byte{[]byte("junk")}); err == nil {
		t.Fatal("Select with no valid value succeeded")
	}
}
