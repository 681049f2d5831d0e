package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIIn(t, "", args...)
}

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(t.Context(), args, []string{"HOME=" + t.TempDir()}, strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), code
}

// startNode runs a node in process on a data dir the CLI can find.
func startNode(t *testing.T, i int, dir string, agents ...node.AgentConfig) *node.Node {
	t.Helper()
	cfg := testnet.Config(t, i, testnet.TCP)
	cfg.DataDir, cfg.APISocket = dir, ""
	if len(agents) > 0 {
		cfg.Agents = agents
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

// aliceAndBob starts two nodes hosting echo agents alice and bob, connects
// them, and waits until alice's node knows bob.
func aliceAndBob(t *testing.T) (a, b *node.Node, dirA, dirB string) {
	t.Helper()
	dirA, dirB = t.TempDir(), t.TempDir()
	a = startNode(t, 0, dirA, node.DefaultAgent("alice"))
	b = startNode(t, 1, dirB, node.DefaultAgent("bob"))
	if _, err := a.Connect(t.Context(), b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	// Both ways: a receiver attributes what it gets (a broadcast from
	// alice, say) from the sender's signed card, which it must hold first.
	waitfor.Eventually(t, testnetWait, func() error {
		if _, err := a.Registry().Resolve("bob"); err != nil {
			return err
		}
		_, err := b.Registry().Resolve("alice")
		return err
	})
	return a, b, dirA, dirB
}

func TestVersionAndHelp(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != 0 || !strings.Contains(out, node.Version) {
		t.Fatalf("version: %d %q", code, out)
	}
	out, _, code = runCLI(t, "version", "--json")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["version"] != node.Version {
		t.Fatalf("version --json: %q", out)
	}
	for _, cmd := range []string{"init", "run", "send", "agents", "id", "status", "events", "broadcast", "peers", "ping", "invite", "join", "crdt", "mcp", "tools", "resources", "prompts"} {
		out, _, code := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "nova-node "+cmd) {
			t.Errorf("%s --help should teach with examples:\n%s", cmd, out)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	cases := [][]string{
		{"send", "--bogus"},
		{"send", "--data-dir", dir},
		{"send", "--data-dir", dir, "--to", "x", "--type", "shout"},
		{"send", "--data-dir", dir, "--to", "x", "--payload", "{nope"},
		{"send", "--data-dir", dir, "--to", "x", "--capability", "y"},
		{"agents", "--data-dir", dir, "--origin", "elsewhere"},
		{"init", "--data-dir", dir, "--agent", "a@b"},
		{"init", "extra-arg"},
	}
	for _, args := range cases {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a clear error", args, code, errOut)
		}
	}
}

func TestInitTwiceKeepsIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n")
	out, _, code := runCLI(t, "init", "--data-dir", dir, "--agent", "alice", "--json")
	var first map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &first) != nil || first["created"] != true {
		t.Fatalf("init: %d %s", code, out)
	}
	out, _, code = runCLI(t, "init", "--data-dir", dir, "--json")
	var second map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &second) != nil || second["created"] != false || second["peerId"] != first["peerId"] {
		t.Fatalf("second init: %s", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if !strings.Contains(string(b), "name: alice") || !strings.Contains(string(b), "# ") {
		t.Fatalf("config is not the commented template with the agent:\n%s", b)
	}
	// id without a running node prints the identity.
	out, _, code = runCLI(t, "id", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, first["peerId"].(string)) || !strings.Contains(out, "not running") {
		t.Fatalf("id offline: %s", out)
	}
}

func TestSendAgentsIDAgainstRunningNodes(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startNode(t, 0, dirA, node.DefaultAgent("alice"))
	b := startNode(t, 1, dirB, node.DefaultAgent("bob"))
	out, errOut, code := runCLI(t, "id", "--data-dir", dirB, "--json")
	var info localapi.IDInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.PeerID != b.ID().String() || len(info.Addrs) == 0 {
		t.Fatalf("id: %d %s %s", code, out, errOut)
	}
	if _, err := a.Connect(t.Context(), info.Addrs[0]); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		_, err := a.Registry().Resolve("bob")
		return err
	})

	out, errOut, code = runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", `{"text":"hi"}`)
	if code != 0 || !strings.Contains(out, "delivered to bob@"+b.ID().String()) || !strings.Contains(out, `"text": "hi"`) {
		t.Fatalf("send: %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", `42`, "--json")
	var res localapi.SendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Response == nil || string(res.Response.Payload) != "42" || !res.Result.Delivered {
		t.Fatalf("send --json: %d %s", code, out)
	}
	out, _, code = runCLI(t, "send", "--data-dir", dirA, "--capability", "echo", "--type", "notification", "--payload", `"n"`)
	if code != 0 || !strings.Contains(out, "delivered to") {
		t.Fatalf("send --capability: %d %s", code, out)
	}
	_, errOut, code = runCLI(t, "send", "--data-dir", dirA, "--to", "nobody")
	if code != 1 || !strings.Contains(errOut, "AGENT_NOT_FOUND") || !strings.Contains(errOut, "nobody") {
		t.Fatalf("send to nobody: %d %q", code, errOut)
	}
	out, _, code = runCLI(t, "send", "--data-dir", dirA, "--to", "nobody", "--json")
	if code != 1 || json.Unmarshal([]byte(out), &res) != nil || res.Error == nil || res.Error.Code != "AGENT_NOT_FOUND" {
		t.Fatalf("send --json failure: %d %s", code, out)
	}
	out, _, code = runCLI(t, "agents", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") || !strings.Contains(out, "remote") ||
		!strings.Contains(out, " this ") || !strings.Contains(out, " connected ") {
		t.Fatalf("agents (want alice's node shown as this one, bob's as connected): %s", out)
	}
	out, _, code = runCLI(t, "agents", "--data-dir", dirA, "--origin", "remote", "--json")
	var cards []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &cards) != nil || len(cards) != 1 || cards[0]["id"] != "bob" || cards[0]["origin"] != "remote" ||
		cards[0]["node"] != "connected" || !strings.HasPrefix(fmt.Sprint(cards[0]["address"]), "bob@") {
		t.Fatalf("agents --json (want the NODE column and the address too): %s", out)
	}
}

func TestNoRunningNodeIsAClearError(t *testing.T) {
	_, errOut, code := runCLI(t, "agents", "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "nova-node run") {
		t.Fatalf("%d %q", code, errOut)
	}
}

func TestStatusAndEvents(t *testing.T) {
	_, b, dirA, _ := aliceAndBob(t)
	if _, _, code := runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", "1"); code != 0 {
		t.Fatal("send failed")
	}
	runCLI(t, "send", "--data-dir", dirA, "--to", "nobody")

	out, _, code := runCLI(t, "status", "--data-dir", dirA)
	for _, want := range []string{"PEERS (1)", b.ID().String(), "direct", "agents: bob", "CHANNELS (1)", "open", "alice@", "MESSAGES  sent 1", "request=1", "RECENT ERRORS", "AGENT_NOT_FOUND", "metrics  http://127.0.0.1:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "status", "--data-dir", dirA, "--json")
	var st localapi.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Channels) != 1 || st.Channels[0].State != "open" || st.Metrics.TotalMessagesSent != 1 {
		t.Fatalf("status --json: %s", out)
	}
	out, _, code = runCLI(t, "status", "--data-dir", dirA, "--reset", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Metrics.TotalMessagesSent != 0 {
		t.Fatalf("status --reset: %s", out)
	}
	out, _, code = runCLI(t, "events", "--data-dir", dirA, "--limit", "100")
	if code != 0 || !strings.Contains(out, "routing-decision") || !strings.Contains(out, "message-sent") || !strings.Contains(out, "AGENT_NOT_FOUND") {
		t.Fatalf("events:\n%s", out)
	}
	out, _, code = runCLI(t, "events", "--data-dir", dirA, "--json", "--limit", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &map[string]any{}) != nil {
		t.Fatalf("events --json: %q", out)
	}

	// --follow prints new events as they happen, until cancelled.
	ctx, cancel := context.WithCancel(t.Context())
	var o syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "--data-dir", dirA, "--follow", "--limit", "0", "--json"}, nil, nil, &o, &bytes.Buffer{})
	}()
	waitfor.Eventually(t, testnetWait, func() error {
		runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--type", "notification", "--payload", `"live"`)
		if !strings.Contains(o.String(), `"messageType":"notification"`) {
			return fmt.Errorf("follow printed %q", o.String())
		}
		return nil
	})
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("events --follow exit %d", c)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBroadcastCommand(t *testing.T) {
	a, b, dirA, _ := aliceAndBob(t)
	waitfor.Eventually(t, testnetWait, func() error {
		if len(a.Router().TopicPeers()) == 0 {
			return fmt.Errorf("no topic peers yet")
		}
		return nil
	})
	out, errOut, code := runCLI(t, "broadcast", "--data-dir", dirA, "--payload", `"deploy finished"`)
	if code != 0 || !strings.Contains(out, "published") {
		t.Fatalf("broadcast: %d %s %s", code, out, errOut)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		if m := b.Observer().Metrics(); m.TotalMessagesReceived == 0 {
			return fmt.Errorf("bob's node received nothing")
		}
		return nil
	})
	if _, _, code := runCLI(t, "broadcast", "--data-dir", dirA, "--payload", "{bad"); code != 2 {
		t.Fatalf("bad payload exit %d", code)
	}
}

func TestDiscoveryCommands(t *testing.T) {
	a, b, dirA, dirB := aliceAndBob(t)
	out, _, code := runCLI(t, "agents", "find", "--data-dir", dirA, "--capability", "echo")
	if code != 0 || !strings.Contains(out, "bob@"+b.ID().String()) || !strings.Contains(out, "alice@") {
		t.Fatalf("agents find --capability:\n%s", out)
	}
	out, _, code = runCLI(t, "agents", "find", "--data-dir", dirA, "--tier", "L3", "--json")
	var cards []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &cards) != nil || len(cards) != 2 {
		t.Fatalf("agents find --tier: %s", out)
	}
	if _, errOut, code := runCLI(t, "agents", "find", "--data-dir", dirA, "--capability", "nope"); code != 1 || !strings.Contains(errOut, "CAPABILITY_NOT_FOUND") {
		t.Fatalf("missing capability: %d %s", code, errOut)
	}
	out, _, code = runCLI(t, "agents", "show", "--data-dir", dirA, "bob")
	if code != 0 || !strings.Contains(out, `"host": "`+b.ID().String()) {
		t.Fatalf("agents show: %s", out)
	}
	out, _, code = runCLI(t, "peers", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, b.ID().String()) || !strings.Contains(out, "direct") || !strings.Contains(out, "bob") {
		t.Fatalf("peers: %s", out)
	}
	out, _, code = runCLI(t, "ping", "--data-dir", dirA, "bob", "--count", "2", "--json")
	var pr localapi.PingResult
	if code != 0 || json.Unmarshal([]byte(out), &pr) != nil || len(pr.RTTs) != 2 || pr.Path != "direct" || pr.Peer != b.ID().String() {
		t.Fatalf("ping: %s", out)
	}
	// invite on A, join on a fresh data dir.
	out, _, code = runCLI(t, "invite", "--data-dir", dirA, "--json")
	var inv map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || !strings.HasPrefix(inv["token"].(string), "nova1") {
		t.Fatalf("invite: %s", out)
	}
	dirC := filepath.Join(t.TempDir(), "c")
	out, _, code = runCLI(t, "join", "--data-dir", dirC, inv["token"].(string))
	if code != 0 || !strings.Contains(out, `joined swarm "default"`) {
		t.Fatalf("join: %d %s", code, out)
	}
	cfg, err := node.LoadConfig(dirC, nil)
	if err != nil || len(cfg.Bootstrap) == 0 || !strings.Contains(cfg.Bootstrap[0], a.ID().String()) {
		t.Fatalf("joined config: %v %+v", err, cfg.Bootstrap)
	}
	raw, _ := os.ReadFile(filepath.Join(dirC, "config.yaml"))
	if !strings.Contains(string(raw), "# ") {
		t.Fatal("join lost the config's comments")
	}
	if _, errOut, code := runCLI(t, "join", "--data-dir", dirC, "nova1garbage"); code != 2 || !strings.Contains(errOut, "invalid token") {
		t.Fatalf("bad token: %d %s", code, errOut)
	}
	// A private swarm's invite carries the secret, and join writes it.
	out, errOut, code := runCLI(t, "invite", "--data-dir", dirB, "--new-secret", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || inv["private"] != true {
		t.Fatalf("invite --new-secret: %d %s %s", code, out, errOut)
	}
	dirD := filepath.Join(t.TempDir(), "d")
	if _, _, code := runCLI(t, "join", "--data-dir", dirD, inv["token"].(string)); code != 0 {
		t.Fatal("join private")
	}
	cfgB, _ := node.LoadConfig(dirB, nil)
	cfgD, _ := node.LoadConfig(dirD, nil)
	if cfgD.SwarmSecret == "" || cfgD.SwarmSecret != cfgB.SwarmSecret {
		t.Fatalf("secret not shared: %q vs %q", cfgD.SwarmSecret, cfgB.SwarmSecret)
	}
}

func TestQRCodeRendersAndHasQuietZone(t *testing.T) {
	q, err := qrText("nova1" + strings.Repeat("abcdefgh", 30))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(q, "\n"), "\n")
	if len(lines) < 15 || strings.TrimSpace(lines[0]) != "" {
		t.Fatalf("QR: %d lines, first %q", len(lines), lines[0])
	}
	width := len([]rune(lines[1]))
	for i, l := range lines {
		if len([]rune(l)) != width {
			t.Fatalf("line %d has width %d, want %d", i, len([]rune(l)), width)
		}
	}
	if !strings.ContainsAny(q, "█▀▄") {
		t.Fatal("no modules drawn")
	}
}

func TestCRDTCommands(t *testing.T) {
	_, _, dirA, dirB := aliceAndBob(t)
	// No node holds the document yet: get on B creates nothing (the
	// watch below opens it).
	if _, errOut, code := runCLI(t, "crdt", "get", "--data-dir", dirB, "plan"); code != 1 || !strings.Contains(errOut, "DOC_NOT_FOUND") {
		t.Fatalf("get on B of a document nobody holds: exit %d, %q", code, errOut)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var w syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"crdt", "watch", "--data-dir", dirB, "plan", "--json"}, nil, nil, &w, &bytes.Buffer{})
	}()
	out, errOut, code := runCLI(t, "crdt", "set", "--data-dir", dirA, "plan", "/goal", `"ship v1"`)
	if code != 0 || !strings.Contains(out, `"ship v1"`) {
		t.Fatalf("set: %d %s %s", code, out, errOut)
	}
	runCLI(t, "crdt", "add", "--data-dir", dirA, "plan", "/owners", `"alice"`)
	runCLI(t, "crdt", "incr", "--data-dir", dirA, "plan", "/done", "2")
	runCLI(t, "crdt", "add", "--data-dir", dirB, "plan", "/owners", `"bob"`)
	waitfor.Eventually(t, testnetWait, func() error {
		out, _, _ := runCLI(t, "crdt", "get", "--data-dir", dirB, "plan", "--json")
		var v localapi.DocView
		if json.Unmarshal([]byte(out), &v) != nil {
			return fmt.Errorf("bad output %q", out)
		}
		var doc struct {
			Goal   string   `json:"goal"`
			Owners []string `json:"owners"`
			Done   int      `json:"done"`
		}
		json.Unmarshal(v.Value, &doc)
		if doc.Goal != "ship v1" || len(doc.Owners) != 2 || doc.Done != 2 {
			return fmt.Errorf("B sees %s", v.Value)
		}
		return nil
	})
	waitfor.Eventually(t, testnetWait, func() error {
		if !strings.Contains(w.String(), `"remote":true`) || !strings.Contains(w.String(), "/goal") {
			return fmt.Errorf("watch printed %q", w.String())
		}
		return nil
	})
	cancel()
	<-done
	waitfor.Eventually(t, testnetWait, func() error {
		out, _, code := runCLI(t, "crdt", "docs", "--data-dir", dirA)
		if code != 0 || !strings.Contains(out, "plan") || !strings.Contains(out, "up to date with peers") {
			return fmt.Errorf("docs: %s", out)
		}
		return nil
	})
	for _, bad := range [][]string{
		{"crdt", "set", "--data-dir", dirA, "plan", "/x", "{nope"},
		{"crdt", "incr", "--data-dir", dirA, "plan", "/x", "lots"},
		{"crdt", "set", "--data-dir", dirA, "plan"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	// A path that is no JSON Pointer is a usage error (exit 2), refused by the CLI.
	if _, errOut, code := runCLI(t, "crdt", "set", "--data-dir", dirA, "plan", "no-slash", "1"); code != 2 || !strings.Contains(errOut, "path") {
		t.Fatalf("bad path: %d %s", code, errOut)
	}
}

// A config.yaml broken while the node runs does not cut the CLI off from
// that node: status warns and answers from the data dir's socket.
func TestStatusWithABrokenConfigReachesTheRunningNode(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("listne: [oops]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "status", "--data-dir", dir, "--json")
	if code != 0 || !strings.Contains(errOut, "warning:") || !strings.Contains(out, `"peerId"`) {
		t.Fatalf("status with a broken config: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
