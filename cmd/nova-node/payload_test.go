package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestPayloadFromFile: --payload @FILE and @- (stdin) send the JSON value
// they hold, for send and broadcast; a file that is missing, empty or not
// JSON is a usage error (exit 2) that names the file.
func TestPayloadFromFile(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("req.json", "{\n  \"text\": \"from a file\",\n  \"n\": [1, 2]\n}\n")

	out, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "alice", "--payload", "@"+good, "--json")
	var res localapi.SendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Response == nil || compact(res.Response.Payload) != `{"text":"from a file","n":[1,2]}` {
		t.Fatalf("send --payload @file: %d %q %q", code, out, errOut)
	}
	out, errOut, code = runCLIIn(t, `"from stdin"`+"\n", "send", "--data-dir", dir, "--to", "alice", "--payload", "@-", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Response == nil || compact(res.Response.Payload) != `"from stdin"` {
		t.Fatalf("send --payload @-: %d %q %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "broadcast", "--data-dir", dir, "--payload", "@"+good)
	if code != 0 || !strings.Contains(out, "published") {
		t.Fatalf("broadcast --payload @file: %d %q %q", code, out, errOut)
	}

	bad := write("bad.json", `{"text": nope}`)
	empty := write("empty.json", " \n")
	missing := filepath.Join(files, "missing.json")
	huge := write("huge.json", `"`+strings.Repeat("x", localapi.MaxSendRequest)+`"`)
	// Under what the API takes, over what an envelope carries.
	big := write("big.json", `"`+strings.Repeat("x", envelope.MaxPayloadSize)+`"`)
	deep := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	deepFile := write("deep.json", deep)
	atLimit := strings.Repeat("[", envelope.MaxPayloadDepth) + strings.Repeat("]", envelope.MaxPayloadDepth)
	if _, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "alice", "--payload", atLimit); code != 0 {
		t.Fatalf("a payload %d deep: %d %q", envelope.MaxPayloadDepth, code, errOut)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  []string
	}{
		{"", []string{"send", "--to", "alice", "--payload", "@" + bad}, []string{bad, "not valid JSON", "at byte"}},
		{"", []string{"broadcast", "--payload", "@" + bad}, []string{bad, "not valid JSON"}},
		{"", []string{"send", "--to", "alice", "--payload", "@" + empty}, []string{empty, "empty"}},
		{"", []string{"send", "--to", "alice", "--payload", "@" + missing}, []string{missing, "no such file"}},
		{"", []string{"send", "--to", "alice", "--payload", "@" + huge}, []string{huge, "over 2097152 bytes"}},
		{"{nope", []string{"send", "--to", "alice", "--payload", "@-"}, []string{"@-", "stdin is not valid JSON"}},
		{"", []string{"send", "--to", "alice", "--payload", "@"}, []string{"@FILE"}},
		{"", []string{"send", "--to", "alice", "--payload", "{nope"}, []string{"not valid JSON", "@FILE"}},
		{"", []string{"send", "--to", "alice", "--payload", "@" + big}, []string{big, "over the 1044480-byte limit", "hint: a payload is at most 1044480 bytes"}},
		{"", []string{"broadcast", "--payload", "@" + big}, []string{"over the 1044480-byte limit"}},
		{"", []string{"send", "--to", "alice", "--payload", deep}, []string{"nested 500 levels deep", "hint: arrays and objects nest at most 64 levels"}},
		{"", []string{"send", "--to", "alice", "--payload", "@" + deepFile}, []string{deepFile, "nested 500 levels deep"}},
		// An unset shell variable: --payload "$P".
		{"", []string{"send", "--to", "alice", "--payload", ""}, []string{"--payload is empty", "hint: ", "--payload null"}},
		{"", []string{"broadcast", "--payload", ""}, []string{"--payload is empty"}},
	} {
		args := append(c.args, "--data-dir", dir)
		_, errOut, code := runCLIIn(t, c.stdin, args...)
		for _, w := range c.want {
			if code != 2 || !strings.Contains(errOut, w) {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, w)
				break
			}
		}
		out, _, code := runCLIIn(t, c.stdin, append(args, "--json")...)
		if e := jsonError(t, out); code != 2 || e.Code != codeUsage {
			t.Errorf("%v --json: exit %d, %q", c.args, code, out)
		}
	}
	// --payload left out still sends null; --payload null too.
	for _, args := range [][]string{{"send", "--to", "alice"}, {"send", "--to", "alice", "--payload", "null"}} {
		out, errOut, code := runCLI(t, append(args, "--data-dir", dir, "--json")...)
		var res localapi.SendResult
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Response == nil || compact(res.Response.Payload) != "null" {
			t.Errorf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	if m := mustStatus(t, dir).Metrics; m.ErrorCount != 0 {
		t.Errorf("a refused payload reached the node: %d errors", m.ErrorCount)
	}
}

func compact(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

func mustStatus(t *testing.T, dir string) localapi.Status {
	t.Helper()
	out, errOut, code := runCLI(t, "status", "--data-dir", dir, "--json")
	var st localapi.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: %d %q %q", code, out, errOut)
	}
	return st
}
