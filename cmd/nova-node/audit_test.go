package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInviteWarnsOfLoopbackOnly: a node listening on 127.0.0.1 only gives a
// token no other device can use: invite says so on stderr, and in a
// "warnings" member with --json (stdout stays one JSON document).
func TestInviteWarnsOfLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	out, errOut, code := runCLI(t, "invite", "--data-dir", dir, "--no-qr")
	if code != 0 || !strings.Contains(errOut, "warning: ") || !strings.Contains(errOut, "loopback") || strings.Contains(out, "warning") {
		t.Fatalf("invite: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "invite", "--data-dir", dir, "--json")
	var inv struct{ Warnings []string }
	if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &inv) != nil || len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], "loopback") {
		t.Fatalf("invite --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for addrs, want := range map[string]bool{
		"/ip4/127.0.0.1/tcp/1/p2p/12D3KooWDH7XiyoBNNuuzL9jZ8LsgCstqhSmyoUsZ1exQuCcVp2x": true,
		"/ip4/127.0.0.1/tcp/1 /ip6/::1/udp/1/quic-v1":                                   true,
		"/ip4/127.0.0.1/tcp/1 /ip4/192.168.1.20/tcp/1":                                  false,
		"": false,
	} {
		if got := onlyLoopback(strings.Fields(addrs)); got != want {
			t.Errorf("onlyLoopback(%q) = %v", addrs, got)
		}
	}
}
