package mcpbridge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// toolCallParams writes, on one line, what json.Marshal makes of the
// go-sdk's CallToolParams for the same name, arguments and token.
func TestToolCallParamsAsMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.String().Draw(t, "name")
		obj := rapid.MapOf(rapid.String(), rapid.OneOf(
			rapid.Just[any](nil), rapid.Map(rapid.Int(), func(i int) any { return float64(i) }),
			rapid.Map(rapid.String(), func(s string) any { return s }),
		)).Draw(t, "args")
		var args []byte
		if rapid.Bool().Draw(t, "indent") {
			args, _ = json.MarshalIndent(obj, "", "\n\t ")
		} else {
			args, _ = json.Marshal(obj)
		}
		p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
		if rapid.Bool().Draw(t, "progress") {
			p.SetProgressToken("nova-" + rapid.StringMatching(`[0-9]{1,5}`).Draw(t, "tok"))
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		nameJSON, _ := json.Marshal(name)
		got, err := toolCallParams(nameJSON, args, p.GetProgressToken())
		if err != nil {
			t.Fatal(err)
		}
		sameParams(t, got, want)
	})
}

// peerCallParams writes, on one line, what json.Marshal makes of the
// go-sdk's CallToolParams for the same caller, call token, name and
// arguments, and refuses arguments that are not JSON as it does.
func TestPeerCallParamsAsMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		as := rapid.String().Draw(t, "as")
		name := rapid.String().Draw(t, "name")
		args := []byte(rapid.SampledFrom([]string{`{}`, `{"a": [1, 2,
 {"b":"<&>\u2028"}]}`, `null`, `"x"`, `{"a":`, `{"a":1}{}`, ` {"text" : "ping"} `}).Draw(t, "args"))
		tok := rapid.SampledFrom([]string{"", "nova-1", "nova-\"<9>"}).Draw(t, "tok")
		progress := rapid.Bool().Draw(t, "progress")
		p := &mcp.CallToolParams{Meta: mcp.Meta{MetaCaller: as}, Name: name, Arguments: json.RawMessage(args)}
		if tok != "" {
			p.Meta[metaCall] = tok
			if progress {
				p.SetProgressToken(tok)
			}
		}
		want, werr := json.Marshal(p)
		got, err := peerCallParams(as, name, args, tok, progress)
		if (err != nil) != (werr != nil) {
			t.Fatalf("error %v, json.Marshal's %v", err, werr)
		}
		if err != nil {
			return
		}
		sameParams(t, got, want)
	})
}

// sameParams fails t unless got is one line of JSON equal in value to want.
func sameParams(t *rapid.T, got, want []byte) {
	if bytes.ContainsAny(got, "\r\n") {
		t.Fatalf("params span lines: %q", got)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got %s, want %s", got, want)
	}
}
