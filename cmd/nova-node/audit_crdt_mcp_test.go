package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestCRDTWatchNoNode: `crdt watch` with no node running, and with a node
// killed under it (the stream cut off mid-response), is NO_NODE with the
// hint to start one, as `events --follow` is; not INTERNAL with the HTTP
// client's words.
func TestCRDTWatchNoNode(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCLI(t, "crdt", "watch", "plan", "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "(NO_NODE)") || !strings.Contains(errOut, "\nhint: ") || strings.Contains(errOut, "dial unix") {
		t.Errorf("crdt watch, no node: exit %d, stderr %q; want NO_NODE with a hint", code, errOut)
	}

	dyingNode(t, dir, `{"doc":"plan","source":"alice@12D3KooWDH7XiyoBNNuuzL9jZ8LsgCstqhSmyoUsZ1exQuCcVp2x","paths":[],"clock":{},"remote":false}`)
	out, errOut, code := runCLI(t, "crdt", "watch", "plan", "--data-dir", dir, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], `"doc":"plan"`) || errOut != "" {
		t.Fatalf("crdt watch cut off: exit %d, stdout %q, stderr %q; want the change, then the error", code, out, errOut)
	}
	e := jsonError(t, lines[1])
	if e.Code != "NO_NODE" || !strings.Contains(e.Message, "broke off") || !strings.Contains(e.Hint, "nova-node run") {
		t.Errorf("crdt watch cut off: %+v; want NO_NODE, what happened and how to start the node", e)
	}
}

// TestCRDTBadPathIsUsage: a path that is no JSON Pointer is a usage error
// (exit 2) with a hint on how to write one, found before anything is sent
// (no node runs here: a good path gets as far as NO_NODE).
func TestCRDTBadPathIsUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"set", "plan", "goal", "1"},
		{"set", "plan", "/a/~2", "1"},
		{"del", "plan", "goal"},
		{"add", "plan", "tags", `"x"`},
		{"incr", "plan", "done"},
		{"get", "plan", "goal"},
	} {
		_, errOut, code := runCLI(t, append(append([]string{"crdt"}, args...), "--data-dir", dir)...)
		if code != 2 || !strings.Contains(errOut, "(USAGE)") || !strings.Contains(errOut, "invalid path") ||
			strings.Contains(errOut, "delta:") || !strings.Contains(errOut, "hint: paths are JSON Pointers") || !strings.Contains(errOut, "~1") {
			t.Errorf("crdt %v: exit %d, stderr %q; want USAGE with a JSON Pointer hint", args, code, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "crdt", "set", "plan", "/a~1b/~0c", "1", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "NO_NODE") {
		t.Errorf("crdt set with a good path, no node: exit %d, stderr %q; want NO_NODE", code, errOut)
	}
}

// TestCRDTWording: del says what it deleted; remove on a string says the
// path holds a string, not a set (nothing would be replaced).
func TestCRDTWording(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	runCLI(t, "crdt", "set", "plan", "/goal", `"ship"`, "--data-dir", dir)
	_, errOut, code := runCLI(t, "crdt", "remove", "plan", "/goal", `"ship"`, "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "DOC_TYPE_MISMATCH") || !strings.Contains(errOut, "/goal holds a string, not a set") ||
		strings.Contains(errOut, "would replace") {
		t.Errorf("crdt remove on a string: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := runCLI(t, "crdt", "del", "plan", "/goal", "--data-dir", dir)
	if code != 0 || strings.TrimSpace(out) != "deleted /goal from plan" {
		t.Errorf("crdt del: exit %d, stdout %q, stderr %q; want \"deleted /goal from plan\"", code, out, errOut)
	}
	out, _, code = runCLI(t, "crdt", "del", "plan", "/goal", "--data-dir", dir, "--json")
	var v localapi.DocView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Doc != "plan" || v.Path != "/goal" {
		t.Errorf("crdt del --json: exit %d, %q; want the document view", code, out)
	}
}

// TestInviteRelayChecked: an --relay that is no relay multiaddr is a usage
// error naming the flag (before a node is asked); --json lists no relays
// as [], not null.
func TestInviteRelayChecked(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCLI(t, "invite", "--relay", "garbage", "--data-dir", dir, "--no-qr")
	if code != 2 || !strings.Contains(errOut, "--relay") || !strings.Contains(errOut, "(USAGE)") || !strings.Contains(errOut, "hint: ") {
		t.Errorf("invite --relay garbage: exit %d, stderr %q; want USAGE naming --relay", code, errOut)
	}
	startNode(t, 0, dir)
	out, errOut, code := runCLI(t, "invite", "--data-dir", dir, "--json")
	var inv map[string]json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || string(inv["relays"]) != "[]" {
		t.Errorf("invite --json: exit %d, stdout %q, stderr %q; want \"relays\": []", code, out, errOut)
	}
}

// TestMCPNotFoundSaysCodeOnce: a tool, prompt or resource the swarm does
// not have is its own *_NOT_FOUND code, said once, with a hint to the
// list command.
func TestMCPNotFoundSaysCodeOnce(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	for _, c := range []struct {
		args       []string
		code, hint string
	}{
		{[]string{"tools", "call", "nosuch.tool"}, "TOOL_NOT_FOUND", "nova-node tools list"},
		{[]string{"prompts", "get", "nosuch.p"}, "PROMPT_NOT_FOUND", "nova-node prompts list"},
		{[]string{"resources", "read", "nova://nosuch"}, "RESOURCE_NOT_FOUND", "nova-node resources list"},
	} {
		_, errOut, code := runCLI(t, append(c.args, "--data-dir", dir)...)
		if code != 1 || strings.Count(errOut, c.code) != 1 || !strings.Contains(errOut, "("+c.code+")\nhint: ") ||
			!strings.Contains(errOut, c.hint) || strings.Contains(errOut, "calling ") || strings.Contains(errOut, "mcpbridge:") {
			t.Errorf("%v: exit %d, stderr %q; want %s once, and a hint to %s", c.args, code, errOut, c.code, c.hint)
		}
	}
}
