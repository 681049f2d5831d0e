package main

import (
	"strings"
	"testing"
)

// TestBroadcastRefusesQuestions: a broadcast cannot be answered, so the
// types that ask for an answer are refused before the node is asked (no
// node runs here): exit 2 with USAGE, as every command-line mistake, and
// what to use instead.
func TestBroadcastRefusesQuestions(t *testing.T) {
	dir := t.TempDir()
	for _, typ := range []string{"request", "task-proposal"} {
		_, errOut, code := runCLI(t, "broadcast", "--data-dir", dir, "--type", typ, "--payload", `"who is there?"`)
		if code != 2 || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, "(USAGE)") ||
			!strings.Contains(errOut, "cannot be answered") || !strings.Contains(errOut, "nova-node send --to AGENT --type "+typ) {
			t.Errorf("broadcast --type %s: exit %d, stderr %q", typ, code, errOut)
		}
		out, _, code := runCLI(t, "broadcast", "--data-dir", dir, "--type", typ, "--json")
		if e := jsonError(t, out); code != 2 || e.Code != codeUsage || !strings.Contains(e.Hint, "nova-node send") {
			t.Errorf("broadcast --type %s --json: exit %d, %q", typ, code, out)
		}
	}
	// A type nobody answers gets as far as asking the node.
	if _, errOut, code := runCLI(t, "broadcast", "--data-dir", dir, "--type", "notification"); code != 1 || !strings.Contains(errOut, "nova-node run") {
		t.Errorf("broadcast notification without a node: exit %d, %q", code, errOut)
	}
}

// TestUnknownTypeListsTypes: a mistyped --type is a usage error whose hint
// lists the types to choose from (for broadcast, those it takes).
func TestUnknownTypeListsTypes(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "bob", "--type", "notify")
	if code != 2 || !strings.Contains(errOut, `"notify"`) || !strings.Contains(errOut, "hint: --type is one of: request, response, notification") {
		t.Errorf("send --type notify: exit %d, %q", code, errOut)
	}
	out, _, code := runCLI(t, "broadcast", "--data-dir", dir, "--type", "notify", "--json")
	e := jsonError(t, out)
	if code != 2 || !strings.Contains(e.Hint, "notification") || strings.Contains(e.Hint, "request") {
		t.Errorf("broadcast --type notify --json: exit %d, %+v; want the types a broadcast takes", code, e)
	}
}
