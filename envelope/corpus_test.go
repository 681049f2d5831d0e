package envelope_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/envelope"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestWriteFuzzCorpus writes the seed corpora of FuzzDecodeCBOR and
// FuzzDecodeJSON: valid encodings and hostile variants. Run it with
// go test -run TestWriteFuzzCorpus -write-corpus ./envelope/
// Files of other names in those directories (crashers the fuzzer found)
// are left alone.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to regenerate testdata/fuzz")
	}
	for target, inputs := range map[string]map[string][]byte{
		"FuzzDecodeCBOR": cborCorpus(t),
		"FuzzDecodeJSON": jsonCorpus(t),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range inputs {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func cborCorpus(t *testing.T) map[string][]byte {
	out := make(map[string][]byte)
	for name, e := range seedEnvelopes() {
		b, err := envelope.EncodeCBOR(e)
		if err != nil {
			t.Fatal(err)
		}
		out["valid-"+name] = b
	}
	c := codecs[0]
	mod := func(f func(m map[string]any)) []byte {
		m := rawMap(c)
		f(m)
		return c.raw(t, m)
	}
	full := out["valid-full"]
	extra := func(key string, val []byte) []byte { // one more pair in the top-level map
		b := bytes.Clone(full)
		b[0]++
		k, _ := cbor.Marshal(key)
		return append(append(b, k...), val...)
	}
	venus, _ := cbor.Marshal("venus")
	out["version-7"] = mod(func(m map[string]any) { m["schemaVersion"] = 7 })
	out["version-2-new-layout"] = mod(func(m map[string]any) { m["schemaVersion"] = 2; m["payload"] = []int{1} })
	out["missing-version"] = mod(func(m map[string]any) { delete(m, "schemaVersion") })
	out["unknown-fields"] = mod(func(m map[string]any) { m["future"] = map[string]any{"x": []any{1, "a"}} })
	out["case-variant-key"] = mod(func(m map[string]any) { m["Sender"] = "venus" })
	out["text-payload"] = mod(func(m map[string]any) { m["payload"] = "{}" })
	out["payload-not-json"] = mod(func(m map[string]any) { m["payload"] = []byte("{") })
	out["payload-deep"] = mod(func(m map[string]any) {
		m["payload"] = []byte(strings.Repeat("[", 70) + strings.Repeat("]", 70))
	})
	out["tier-9"] = mod(func(m map[string]any) { m["metadata"].(map[string]any)["tier"] = 9 })
	out["duplicate-key"] = extra("sender", venus)
	out["deep-nesting"] = extra("x", append(bytes.Repeat([]byte{0x81}, 20), 0))
	out["tag"] = extra("x", []byte{0xc1, 0x00})
	out["huge-array-header"] = extra("x", []byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	out["huge-bytes-header"] = extra("x", []byte{0x5a, 0xff, 0xff, 0xff, 0xff})
	indef := bytes.Clone(full)
	indef[0] = 0xbf
	out["indefinite-map"] = append(indef, 0xff)
	out["truncated"] = full[:len(full)/2]
	out["trailing"] = append(bytes.Clone(full), 0x00)
	out["null"] = []byte{0xf6}
	out["empty"] = []byte{}
	return out
}

func jsonCorpus(t *testing.T) map[string][]byte {
	out := make(map[string][]byte)
	for name, e := range seedEnvelopes() {
		b, err := envelope.EncodeJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		out["valid-"+name] = b
	}
	full := string(out["valid-full"])
	body := full[1 : len(full)-1]
	var pretty bytes.Buffer
	if err := jsonIndent(&pretty, out["valid-full"]); err != nil {
		t.Fatal(err)
	}
	out["indented"] = pretty.Bytes()
	out["escaped-key"] = []byte(strings.Replace(full, `"sender"`, `"\u0073ender"`, 1))
	out["unknown-fields"] = []byte(`{"future":{"x":[1,"a",null]},` + body + `}`)
	out["version-2"] = []byte(strings.Replace(full, `"schemaVersion":1`, `"schemaVersion":2`, 1))
	out["version-2-new-layout"] = []byte(`{"schemaVersion":2,"id":7,"payload":[1]}`)
	out["missing-version"] = []byte(strings.Replace(full, `"schemaVersion":1,`, ``, 1))
	out["float-version"] = []byte(strings.Replace(full, `"schemaVersion":1`, `"schemaVersion":1.0`, 1))
	out["duplicate-key"] = []byte(`{` + body + `,"sender":"venus"}`)
	out["duplicate-metadata-key"] = []byte(strings.Replace(full, `{"tier":2`, `{"tier":2,"tier":0`, 1))
	out["case-variant-key"] = []byte(strings.Replace(full, `"id"`, `"ID"`, 1))
	out["deep-nesting"] = []byte(`{"x":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `,` + body + `}`)
	out["payload-whitespace"] = []byte(strings.Replace(full, `{"task":"map the craters","n":3}`, "{ \"task\" :\n\t\"map the craters\" , \"n\" : 3 }", 1))
	out["trailing"] = []byte(full + ` {}`)
	out["invalid-utf8"] = []byte(strings.Replace(full, "venus", "ven\xffus", 1))
	out["tier-300"] = []byte(strings.Replace(full, `"tier":2`, `"tier":300`, 1))
	out["not-object"] = []byte(`[` + full + `]`)
	out["null"] = []byte(`null`)
	out["empty"] = []byte{}
	return out
}

func jsonIndent(dst *bytes.Buffer, b []byte) error { return json.Indent(dst, b, "", "  ") }
