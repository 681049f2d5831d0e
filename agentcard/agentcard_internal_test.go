package agentcard

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/tiers"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz/{FuzzOpen,FuzzCardJSON} seed corpora")

func TestValidVersion(t *testing.T) {
	good := []string{"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
		"1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0-a-b--c"}
	bad := []string{"", "1", "1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3+",
		"1.2.3-a..b", "1.2.3+a_b", "1.2.3 ", " 1.2.3", "a.b.c", "1.2.3-é", "-1.2.3", strings.Repeat("1", 63) + ".0.0"}
	for _, v := range good {
		if !validVersion(v) {
			t.Errorf("validVersion(%q) = false", v)
		}
	}
	for _, v := range bad {
		if validVersion(v) {
			t.Errorf("validVersion(%q) = true", v)
		}
	}
}

func TestIDPatterns(t *testing.T) {
	// Every byte, first and later position, against the documented sets.
	for b := 0; b < 256; b++ {
		c := string(rune(b))
		if b >= 0x80 {
			c = string([]byte{byte(b)})
		}
		alnum := isAlnum(byte(b))
		if got := ValidID(c); got != alnum {
			t.Errorf("ValidID(%q) = %v", c, got)
		}
		if got := ValidID("a" + c); got != (alnum || strings.ContainsRune("_.-", rune(b))) {
			t.Errorf("ValidID(a%q) = %v", c, got)
		}
		if got := ValidCapabilityID("a" + c); got != (alnum || strings.ContainsRune("_.:/-", rune(b))) {
			t.Errorf("ValidCapabilityID(a%q) = %v", c, got)
		}
	}
	if ValidCapabilityID(strings.Repeat("a", 129)) || !ValidCapabilityID(strings.Repeat("a", 128)) {
		t.Error("capability id length limit is not 128")
	}
}

func TestPayloadTypeIsACopy(t *testing.T) {
	if string(PayloadType) != payloadType {
		t.Fatal("PayloadType and payloadType differ")
	}
	r := &Record{}
	c := r.Codec()
	c[0] = 'X'
	if string(r.Codec()) != payloadType {
		t.Fatal("Codec returns shared memory")
	}
}

// corpusKey is the deterministic identity used for the seed corpora.
func corpusKey(t *testing.T, seed byte) (crypto.PrivKey, peer.ID) {
	t.Helper()
	var s [32]byte
	s[0] = seed
	key, _, err := crypto.GenerateEd25519Key(chachaReader{rand.NewChaCha8(s)})
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, id
}

type chachaReader struct{ r *rand.ChaCha8 }

func (c chachaReader) Read(p []byte) (int, error) { return c.r.Read(p) }

type testRecord struct {
	domain, codec string
	payload       []byte
}

func (r *testRecord) Domain() string                 { return r.domain }
func (r *testRecord) Codec() []byte                  { return []byte(r.codec) }
func (r *testRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *testRecord) UnmarshalRecord([]byte) error   { return nil }

func corpusCard() Card {
	return Card{
		ID: "venus", Name: "VENUS", Version: "1.4.2-rc.1", Description: "operational agent <&>",
		Tier: tiers.L2, Protocols: []string{"a2a/1.0", "mcp/2024-11-05"},
		Endpoints: []Endpoint{{Transport: "local"}, {Transport: "libp2p", Address: "/ip4/127.0.0.1/tcp/4001"}},
		Capabilities: []Capability{
			{ID: "codegen.react", Name: "React", Description: "writes components",
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"spec":{"type":"string"}}}`),
				OutputSchema: json.RawMessage(`{"type":"string"}`)},
			{ID: "mcp:tools/list", Name: "tools"},
		},
		Revision: 7, SandboxID: "sandbox-a", Origin: OriginLocal, LastSeenAt: 1767225600000,
	}
}

// fuzzCorpus builds the named seed inputs of FuzzOpen: valid sealed cards
// (names start with "valid-") and hostile variants.
func fuzzCorpus(t *testing.T) map[string][]byte {
	keyA, idA := corpusKey(t, 1)
	_, idB := corpusKey(t, 2)
	sealCard := func(c Card) []byte {
		data, err := Seal(c, keyA)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	sealRaw := func(rec record.Record) []byte {
		env, err := record.Seal(rec, keyA)
		if err != nil {
			t.Fatal(err)
		}
		data, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	full := corpusCard()
	minimal := Card{ID: "io", Name: "IO", Version: "0.1.0", Capabilities: []Capability{}}
	valid := sealCard(full)
	hosted := full.Clone()
	hosted.Host = idA.String()
	payload, _ := marshalCard(&hosted)

	out := map[string][]byte{
		"valid-full":    valid,
		"valid-minimal": sealCard(minimal),
		"empty":         {},
		"one-byte":      {0x0a},
		"truncated":     valid[:len(valid)/2],
	}
	flip := func(name string, at int) {
		b := bytes.Clone(valid)
		b[at] ^= 0x01
		out[name] = b
	}
	flip("tampered-signature", len(valid)-1)
	flip("tampered-payload", bytes.Index(valid, []byte("operational")))
	flip("tampered-key", 8)

	other := hosted.Clone()
	other.Host = idB.String()
	otherJSON, _ := marshalCard(&other)
	out["host-not-signer"] = sealRaw(&testRecord{PayloadDomain, payloadType, otherJSON})
	noHost := full.Clone()
	noHostJSON, _ := marshalCard(&noHost)
	out["no-host"] = sealRaw(&testRecord{PayloadDomain, payloadType, noHostJSON})
	out["wrong-payload-type"] = sealRaw(&testRecord{PayloadDomain, "/libp2p/routing-state-record", payload})
	out["wrong-domain"] = sealRaw(&testRecord{"libp2p-routing-state", payloadType, payload})
	for name, p := range map[string]string{
		"payload-null":          `null`,
		"payload-array":         `[]`,
		"payload-not-json":      `hello`,
		"payload-trailing":      string(payload) + `{}`,
		"payload-duplicate-key": strings.Replace(string(payload), `{"id":"venus"`, `{"id":"venus","id":"mars"`, 1),
		"payload-case-key":      strings.Replace(string(payload), `"host":`, `"Host":`, 1),
		"payload-unknown-key":   strings.Replace(string(payload), `{"id"`, `{"skills":[],"id"`, 1),
		"payload-bad-tier":      strings.Replace(string(payload), `"tier":2`, `"tier":9`, 1),
		"payload-text-tier":     strings.Replace(string(payload), `"tier":2`, `"tier":"L2"`, 1),
		"payload-bad-schema":    strings.Replace(string(payload), `{"type":"string"}`, `{"type":"string"`, 1),
		"payload-deep":          strings.Replace(string(payload), `{"type":"string"}`, strings.Repeat("[", 5000)+strings.Repeat("]", 5000), 1),
		"payload-big-numbers":   strings.Replace(string(payload), `"revision":7`, `"revision":18446744073709551616`, 1),
		"payload-missing-caps":  strings.Replace(string(payload), `"capabilities":[`, `"capabilitiez":[`, 1),
	} {
		out[name] = sealRaw(&testRecord{PayloadDomain, payloadType, []byte(p)})
	}
	// "payload-text-tier" is valid: the tier may be written "L2".
	out["valid-text-tier"] = out["payload-text-tier"]
	delete(out, "payload-text-tier")
	return out
}

func cardJSONCorpus(t *testing.T) map[string][]byte {
	full := corpusCard()
	_, id := corpusKey(t, 1)
	full.Host = id.String()
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"full":          b,
		"minimal":       []byte(`{"id":"io","name":"IO","version":"0.1.0","tier":3,"capabilities":[]}`),
		"escaped-keys":  []byte(`{"i\u0064":"io","name":"IO","version":"0.1.0","tier":3,"capabilities":[]}`),
		"nulls":         []byte(`{"id":"io","name":null,"capabilities":null,"endpoints":[null],"protocols":null}`),
		"schema-spaces": []byte(`{"id":"io","name":"IO","version":"0.1.0","tier":0,"capabilities":[{"id":"c","inputSchema": { "a" : [ 1 , 2e10 ] } }]}`),
		"invalid-utf8":  []byte("{\"id\":\"io\",\"name\":\"\xff\xfe\",\"version\":\"0.1.0\",\"tier\":0,\"capabilities\":[]}"),
	}
}

// TestWriteFuzzCorpus rewrites the seed corpora when run with -write-corpus.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to regenerate testdata/fuzz")
	}
	for target, files := range map[string]map[string][]byte{
		"FuzzOpen":     fuzzCorpus(t),
		"FuzzCardJSON": cardJSONCorpus(t),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFuzzOpenCorpus checks that the committed corpus is current: it
// matches what fuzzCorpus builds, the valid- entries open and the others
// are rejected.
func TestFuzzOpenCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fuzzCorpus(t)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data := parseCorpusFile(t, raw)
		if w, ok := want[e.Name()]; ok && !bytes.Equal(w, data) {
			t.Errorf("%s is stale: rerun with -write-corpus", e.Name())
		}
		_, _, err = Open(data)
		if strings.HasPrefix(e.Name(), "valid-") != (err == nil) {
			t.Errorf("%s: Open error = %v", e.Name(), err)
		}
	}
	for name := range want {
		if !slices.Contains(names, name) {
			t.Errorf("corpus lacks %s: rerun with -write-corpus", name)
		}
	}
}

func parseCorpusFile(t *testing.T, raw []byte) []byte {
	t.Helper()
	header, body, ok := strings.Cut(string(raw), "\n")
	if !ok || header != "go test fuzz v1" {
		t.Fatalf("bad corpus header %q", header)
	}
	body = strings.TrimSpace(body)
	inner, ok := strings.CutPrefix(body, "[]byte(")
	inner, ok2 := strings.CutSuffix(inner, ")")
	if !ok || !ok2 {
		t.Fatalf("bad corpus body %.40q", body)
	}
	s, err := strconv.Unquote(inner)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}
