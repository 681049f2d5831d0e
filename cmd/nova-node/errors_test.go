package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// jsonError decodes out, a failed command's --json output, as one JSON
// object with an "error" member, and returns that member; it fails the test
// if out is anything else or the member lacks a code, message or hint.
func jsonError(t *testing.T, out string) errorBody {
	t.Helper()
	var v struct {
		Error *errorBody `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("--json failure output is not one JSON object (%v): %q", err, out)
	}
	if v.Error == nil || v.Error.Code == "" || v.Error.Message == "" || v.Error.Hint == "" {
		t.Fatalf("--json failure output has no complete error member: %q", out)
	}
	return *v.Error
}

// TestJSONErrors: with --json every failure is one JSON object on stdout,
// {"error":{"code","message","hint"}}, nothing on stderr, and the same exit
// code as without --json; usage errors, flag errors found before --json
// is parsed, a node that is not running, a node's refusal.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"send", "--data-dir", dir, "--json"}, 2, codeUsage},
		{[]string{"send", "--bogus", "--json"}, 2, codeUsage},
		{[]string{"--json", "send", "--data-dir", dir, "--to", "x", "--payload", "{nope"}, 2, codeUsage},
		{[]string{"send", "--data-dir", dir, "--to", "x", "--type", "shout", "--json"}, 2, codeUsage}, // exit 2 is USAGE, whoever finds the bad value
		{[]string{"init", "extra-arg", "--json"}, 2, codeUsage},
		{[]string{"crdt", "set", "--data-dir", dir, "plan", "--json"}, 2, codeUsage},
		{[]string{"tasks", "show", "--data-dir", dir, "--json"}, 2, codeUsage},
		{[]string{"tools", "call", "--data-dir", dir, "--json"}, 2, codeUsage},
		{[]string{"bogus", "--json"}, 2, codeUsage},
		{[]string{"agents", "--data-dir", dir, "--json"}, 1, codeNoNode},
		{[]string{"status", "--data-dir", dir, "--json"}, 1, codeNoNode},
		{[]string{"events", "--data-dir", dir, "--follow", "--json"}, 1, codeNoNode},
		{[]string{"tools", "list", "--data-dir", dir, "--json"}, 1, codeNoNode},
		{[]string{"a2a", "call", "http://127.0.0.1:1/", "--message", "hi", "--json"}, 1, ""},
	} {
		out, errOut, exit := runCLI(t, c.args...)
		if exit != c.exit || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and nothing on stderr", c.args, exit, errOut, c.exit)
			continue
		}
		e := jsonError(t, out)
		if c.code != "" && e.Code != c.code {
			t.Errorf("%v: code %q, want %q (%q)", c.args, e.Code, c.code, out)
		}
		// Without --json: the same exit code, the error on stderr.
		var plain []string
		for _, a := range c.args {
			if a != "--json" {
				plain = append(plain, a)
			}
		}
		if _, errOut, exit := runCLI(t, plain...); exit != c.exit || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%v: exit %d, stderr %q", plain, exit, errOut)
		}
	}
}

// TestJSONErrorOfAResult: a failure that has a result to show (send's
// exchange) prints that result with the error object as its "error"
// member, and the text form adds a hint line.
func TestJSONErrorOfAResult(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "nobody", "--json")
	e := jsonError(t, out)
	var res localapi.SendResult
	if code != 1 || errOut != "" || json.Unmarshal([]byte(out), &res) != nil || res.Sent == nil || e.Code != "AGENT_NOT_FOUND" ||
		strings.Contains(e.Message, "(AGENT_NOT_FOUND)") || !strings.Contains(e.Hint, "nova-node agents") {
		t.Fatalf("send --json to nobody: %d %q %q", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "send", "--data-dir", dir, "--to", "nobody")
	if code != 1 || strings.Count(errOut, "AGENT_NOT_FOUND") != 1 || !strings.Contains(errOut, "\nhint: `nova-node agents`") {
		t.Fatalf("send to nobody: %d %q", code, errOut)
	}
}

func TestWithErrorKeepsTheResult(t *testing.T) {
	e := errorBody{Code: "X", Message: "m", Hint: "h"}
	b, err := withError(struct {
		Z     int    `json:"z"`
		Error string `json:"error"`
		A     []int  `json:"a"`
	}{1, "old", []int{2}}, e)
	if err != nil || string(b) != `{"z":1,"error":{"code":"X","message":"m","hint":"h"},"a":[2]}` {
		t.Fatalf("replaced in place: %s %v", b, err)
	}
	b, err = withError(map[string]string{"k\"ey": "v"}, e)
	if err != nil || string(b) != `{"k\"ey":"v","error":{"code":"X","message":"m","hint":"h"}}` {
		t.Fatalf("added last: %s %v", b, err)
	}
	if _, err := withError([]int{1}, e); err == nil {
		t.Fatal("an array took an error member")
	}
}

// TestJSONErrorOfAProposal: a proposal waited for that is not accepted is
// its record with an "error" member (exit 1), not the record alone.
func TestJSONErrorOfAProposal(t *testing.T) {
	_, _, dirA, _ := aliceAndBob(t)
	out, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dirA, "--to", "bob", "--task", "nobody answers",
		"--cap", "echo", "--deadline", "500ms", "--wait", "--json")
	e := jsonError(t, out)
	var rec struct {
		Status string `json:"status"`
	}
	if code != 1 || errOut != "" || json.Unmarshal([]byte(out), &rec) != nil || rec.Status != "timed-out" || e.Code != "PROPOSAL_TIMEOUT" {
		t.Fatalf("propose --wait --json, no answer: %d %q %q", code, out, errOut)
	}
}
