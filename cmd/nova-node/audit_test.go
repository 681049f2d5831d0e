package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
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

// TestA2ACallReportsOnce: an echo agent's reply is one text part; an
// unknown agent on a gateway is AGENT_NOT_FOUND with a hint, naming the
// agent's URL (not the fallback agent.json); a URL that is no URL is a
// usage error.
func TestA2ACallReportsOnce(t *testing.T) {
	a, _, dirA, _ := aliceAndBob(t)
	gw := a.A2AURL()
	if gw == "" {
		t.Fatal("the test node has no A2A gateway")
	}
	out, errOut, code := runCLI(t, "--data-dir", dirA, "a2a", "call", gw+"/a2a/bob/", "--message", "hi", "--json")
	var res struct {
		Parts []struct{ Kind, Text string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Parts) != 1 || res.Parts[0].Text != "hi" {
		t.Fatalf("a2a call bob: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "--data-dir", dirA, "a2a", "call", gw+"/a2a/nobody/", "--message", "hi")
	if code != 1 || !strings.Contains(errOut, "AGENT_NOT_FOUND") || !strings.Contains(errOut, "\nhint: ") ||
		strings.Contains(errOut, "agent.json failed") || !strings.Contains(errOut, "/a2a/nobody") {
		t.Fatalf("a2a call nobody: exit %d\nstderr:\n%s", code, errOut)
	}
	out, _, code = runCLI(t, "--data-dir", dirA, "a2a", "call", gw+"/a2a/nobody/", "--message", "hi", "--json")
	if code != 1 || !strings.Contains(out, `"code": "AGENT_NOT_FOUND"`) {
		t.Fatalf("a2a call nobody --json: exit %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "a2a", "call", "notaurl", "--message", "hi"); code != 2 {
		t.Fatalf("a2a call notaurl: exit %d\n%s", code, errOut)
	}
}

// TestCRDTKindsAndWatch: add on a counter and incr on a string are refused; watch prints values, and
// "node stopped" when the node stops.
func TestCRDTKindsAndWatch(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir)
	runCLI(t, "crdt", "incr", "plan", "/done", "--data-dir", dir)
	runCLI(t, "crdt", "set", "plan", "/goal", `"ship"`, "--data-dir", dir)
	for _, args := range [][]string{{"add", "plan", "/done", `"x"`}, {"incr", "plan", "/goal"}} {
		_, errOut, code := runCLI(t, append(append([]string{"crdt"}, args...), "--data-dir", dir)...)
		if code != 1 || !strings.Contains(errOut, "DOC_TYPE_MISMATCH") {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	if out, _, _ := runCLI(t, "crdt", "get", "plan", "--data-dir", dir, "--json"); !strings.Contains(out, `"done": 1`) {
		t.Fatalf("the counter changed:\n%s", out)
	}
	var o, e syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"crdt", "watch", "plan", "--data-dir", dir}, []string{"HOME=" + t.TempDir()}, strings.NewReader(""), &o, &e)
	}()
	waitfor.Eventually(t, testnetWait, func() error {
		runCLI(t, "crdt", "set", "plan", "/goal", `"ship v2"`, "--data-dir", dir)
		if !strings.Contains(o.String(), `/goal = "ship v2"`) {
			return fmt.Errorf("watch printed %q", o.String())
		}
		return nil
	})
	n.Close()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(o.String(), "node stopped") {
			t.Fatalf("watch at node stop: exit %d\n%s\n%s", code, o.String(), e.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end when the node stopped")
	}
}
