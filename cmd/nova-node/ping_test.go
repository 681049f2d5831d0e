package main

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
)

// ping of an agent this node hosts succeeds (it answered INTERNAL), and
// a peer that cannot be reached has a code of its own and a hint.
func TestPingOwnAgentAndUnreachable(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, errOut, code := runCLI(t, "ping", "--data-dir", dir, "alice")
	if code != 0 || !strings.Contains(out, "is on this node") {
		t.Fatalf("ping of its own agent: exit %d %q %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "ping", "--data-dir", dir, "--json", "12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx")
	if e := jsonError(t, out); code != 1 || e.Code != "PEER_UNREACHABLE" || !strings.Contains(e.Hint, "--peer") {
		t.Fatalf("ping of an unknown peer: exit %d %+v", code, e)
	}
}
