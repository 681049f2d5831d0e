package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

// TestFormatEventNamesThePeer: the text form of an event that no agent
// address places (cards received, a security event on a malformed frame)
// says which peer it came from and what happened; a security event names
// the peer even when it has a (claimed) sender; a node-level event reads
// "type detail", not "type : detail".
func TestFormatEventNamesThePeer(t *testing.T) {
	p, err := peer.Decode("12D3KooWQkwHhGMHT4cVonXFECkPmn23L6LmpQLJtEu3FjKxG2WX")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cases := []struct {
		e         localapi.Event
		want, not []string
	}{
		{e: localapi.Event{Type: protocol.EvtCardsReceived, Time: now, Peer: p, Success: true, Detail: "2 new or updated cards", SourceTier: -1, TargetTier: -1},
			want: []string{"cards-received", "peer " + p.String(), ": 2 new or updated cards"}},
		{e: localapi.Event{Type: protocol.EvtSecurityRaised, Time: now, Peer: p, Code: "PROTOCOL_ERROR", Detail: "bad frame", SourceTier: -1, TargetTier: -1},
			want: []string{"peer " + p.String(), "PROTOCOL_ERROR: bad frame"}},
		{e: localapi.Event{Type: protocol.EvtSecurityRaised, Time: now, Peer: p, Sender: "mallory@12D3KooWGcMQNpQQ9hKadKDs328GGAdLbFSwA8xFgCsHH6AMBhc6", Recipient: "alice@12D3KooWLRripXav4U71ekvfGCdbHHQH3HCXr2gR23TzkzN2YrTt",
			MessageType: "request", Code: "UNAUTHORIZED_SENDER", Detail: "not hosted by the peer"},
			want: []string{"mallory@", "-> alice@", "peer " + p.String(), "UNAUTHORIZED_SENDER: not hosted by the peer"}},
		{e: localapi.Event{Type: localapi.EvtPeerGone, Time: now, Peer: p, Success: true, Detail: p.String() + " left: it stayed unreachable"},
			want: []string{"peer-gone        " + p.String() + " left"}, not: []string{" : ", "peer " + p.String()}},
		{e: localapi.Event{Type: protocol.EvtMessageReceived, Time: now, Peer: p, Sender: "bob@12D3KooWQkwHhGMHT4cVonXFECkPmn23L6LmpQLJtEu3FjKxG2WX", Recipient: "alice@12D3KooWGcMQNpQQ9hKadKDs328GGAdLbFSwA8xFgCsHH6AMBhc6", MessageType: "response", Path: "remote", Success: true},
			not: []string{"peer "}},
	}
	for _, c := range cases {
		line := formatEvent(c.e)
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s event: %q lacks %q", c.e.Type, line, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(line, n) {
				t.Errorf("%s event: %q has %q", c.e.Type, line, n)
			}
		}
		if strings.HasSuffix(line, " ") {
			t.Errorf("%s event: %q ends in a space", c.e.Type, line)
		}
	}
}

// TestStatusChannelOrderIsStable: two channels of one pair (the closed one
// and its successor) keep one order whatever order the node lists them in.
func TestStatusChannelOrderIsStable(t *testing.T) {
	mk := func() []protocol.ChannelInfo {
		return []protocol.ChannelInfo{
			{ID: "b", From: "alice@x", To: "bob@y", State: "open"},
			{ID: "c", From: "alice@x", To: "carol@z", State: "open"},
			{ID: "a", From: "alice@x", To: "bob@y", State: "closed"},
		}
	}
	first := mk()
	sortChannels(first)
	second := mk()
	second[0], second[2] = second[2], second[0]
	sortChannels(second)
	for i := range first {
		if first[i].ID != second[i].ID {
			t.Fatalf("order depends on the input: %v vs %v", first, second)
		}
	}
	if first[0].ID != "a" || first[1].ID != "b" || first[2].ID != "c" {
		t.Errorf("order %v, want closed bob, open bob, carol", first)
	}
}

// TestEventsLimit: --limit N prints the last N events, --limit 0 none (so
// that `events --follow --limit 0` shows only what happens from now on),
// and a negative limit is a usage error.
func TestEventsLimit(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	for i := 0; i < 3; i++ {
		if _, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "alice", "--type", "notification", "--payload", "1"); code != 0 {
			t.Fatalf("send: exit %d, %s", code, errOut)
		}
	}
	lines := func(s string) int {
		if s = strings.TrimSpace(s); s == "" {
			return 0
		}
		return strings.Count(s, "\n") + 1
	}
	if out, errOut, code := runCLI(t, "events", "--data-dir", dir, "--limit", "2"); code != 0 || lines(out) != 2 {
		t.Errorf("events --limit 2: exit %d, %d lines:\n%s%s", code, lines(out), out, errOut)
	}
	if out, errOut, code := runCLI(t, "events", "--data-dir", dir, "--limit", "0", "--json"); code != 0 || out != "" {
		t.Errorf("events --limit 0: exit %d, want no event:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "events", "--data-dir", dir); code != 0 || lines(out) < 6 {
		t.Errorf("events: exit %d, %d lines, want the sends' events:\n%s%s", code, lines(out), out, errOut)
	}
	_, errOut, code := runCLI(t, "events", "--data-dir", dir, "--limit", "-1")
	if code != 2 || !strings.Contains(errOut, "--limit must be 0 or more") {
		t.Errorf("events --limit -1: exit %d, %q; want a usage error", code, errOut)
	}
}

// TestEventsStreamCutOff: when the node is killed under `events --follow`
// (the stream ends mid-response), events exits 1 after printing what came,
// and the error says so with NO_NODE and what to do, not INTERNAL and a
// pointer to --help.
func TestEventsStreamCutOff(t *testing.T) {
	dir := t.TempDir()
	dyingNode(t, dir, `{"type":"cards-received","time":"2026-11-25T15:51:11Z","success":true,"sourceTier":-1,"targetTier":-1}`)
	out, errOut, code := runCLI(t, "events", "--data-dir", dir, "--follow", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "cards-received") || errOut != "" {
		t.Fatalf("events cut off: exit %d, stdout %q, stderr %q; want the event, then the error", code, out, errOut)
	}
	e := jsonError(t, lines[1])
	if e.Code != "NO_NODE" || !strings.Contains(e.Message, "broke off") || !strings.Contains(e.Hint, "nova-node run") {
		t.Errorf("events cut off: %+v; want NO_NODE, what happened and how to start the node", e)
	}
}

// TestUnknownSenderHint: a --from that is not one of the node's agents is
// AGENT_NOT_FOUND like an unknown recipient, but no swarm lookup finds a
// sender: the hint says --from takes a local agent.
func TestUnknownSenderHint(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	for _, cmd := range [][]string{
		{"send", "--to", "alice", "--payload", "1"},
		{"broadcast", "--payload", "1"},
	} {
		args := append(cmd, "--data-dir", dir, "--from", "bob")
		_, errOut, code := runCLI(t, args...)
		if code != 1 || !strings.Contains(errOut, "AGENT_NOT_FOUND") || !strings.Contains(errOut, "hint: --from takes an agent this node hosts") {
			t.Errorf("%s --from bob: exit %d, %q", cmd[0], code, errOut)
		}
	}
	// Without --from, the usual advice for a recipient.
	_, errOut, _ := runCLI(t, "send", "--data-dir", dir, "--to", "zed@12D3KooWQkwHhGMHT4cVonXFECkPmn23L6LmpQLJtEu3FjKxG2WX")
	if !strings.Contains(errOut, "hint: `nova-node agents` lists the agents this node knows") {
		t.Errorf("send --to an unknown agent: %q", errOut)
	}
}

// TestPeersAndPingHelpTeach: peers and ping explain what they print, not
// just repeat their one-line summary; ping refuses a --count it would
// otherwise silently replace by 3; and the root help names broadcast among
// the commands whose --json failure is the result with an "error" member.
func TestPeersAndPingHelpTeach(t *testing.T) {
	out, _, _ := runCLI(t, "peers", "--help")
	if !strings.Contains(out, "direct or relayed (through a circuit relay") {
		t.Errorf("peers --help does not say what it prints:\n%s", out)
	}
	out, _, _ = runCLI(t, "ping", "--help")
	if !strings.Contains(out, "the node hosting it") || !strings.Contains(out, "average") {
		t.Errorf("ping --help does not say what it does:\n%s", out)
	}
	for _, n := range []string{"0", "101"} {
		_, errOut, code := runCLI(t, "ping", "bob", "--count", n, "--data-dir", t.TempDir())
		if code != 2 || !strings.Contains(errOut, "--count must be 1 to 100") {
			t.Errorf("ping --count %s: exit %d, %q", n, code, errOut)
		}
	}
	out, _, _ = runCLI(t, "--help")
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "(send, broadcast, tasks propose --wait") {
		t.Errorf("root help leaves broadcast out of the commands with a result:\n%s", out)
	}
}

// TestIDWithoutNode: id on a data dir with neither a running node nor an
// identity is NO_NODE (not INTERNAL with a pointer to --help), and says how
// to make one.
func TestIDWithoutNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	out, _, code := runCLI(t, "id", "--data-dir", dir, "--json")
	e := jsonError(t, out)
	if code != 1 || e.Code != "NO_NODE" || !strings.Contains(e.Message, "nova-node init") || !strings.Contains(e.Hint, "nova-node run") {
		t.Errorf("id on an empty data dir: exit %d, %+v", code, e)
	}
	_, errOut, _ := runCLI(t, "id", "--data-dir", dir)
	if !strings.Contains(errOut, "error: no node in "+dir) || !strings.Contains(errOut, "hint: ") {
		t.Errorf("id on an empty data dir: %q", errOut)
	}
}

// TestSendReportsTheTimeToTheAnswer: for a request, `send` reports how long
// delivery took as the time to its answer, not the routing decision's
// microseconds (a request is routed once queued, however long its delivery
// then takes); --json has it as roundTripMs next to the routing latency.
func TestSendReportsTheTimeToTheAnswer(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"))
	card := node.AgentConfig{Name: "slow", Capabilities: []node.CapabilityConfig{{ID: "slow"}}}.Card()
	if _, err := n.RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		time.Sleep(150 * time.Millisecond) // the agent's own work: part of the scenario
		return "done", nil
	}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "send", "--data-dir", dir, "--to", "slow")
	var ms float64
	if code != 0 || !strings.HasPrefix(out, "delivered to slow@") {
		t.Fatalf("send: exit %d, %q %q", code, out, errOut)
	}
	if _, err := fmt.Sscanf(out[strings.Index(out, "(local, ")+len("(local, "):], "%f ms)", &ms); err != nil || ms < 150 {
		t.Errorf("send to an agent answering after 150 ms reports %q: want at least 150 ms", strings.SplitN(out, "\n", 2)[0])
	}
	out, _, code = runCLI(t, "send", "--data-dir", dir, "--to", "slow", "--json")
	var res localapi.SendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.RoundTripMs < 150 || res.Result.LatencyMs >= 150 {
		t.Errorf("send --json: exit %d, roundTripMs %v, result.latencyMs %v; want the round trip and the routing latency apart", code, res.RoundTripMs, res.Result.LatencyMs)
	}
}

// TestAgentsFindUsage: `agents find` needs exactly one criterion and a
// valid tier (usage errors, exit 2, checked before asking the node); a
// search with no match says so, and a name or capability not found is not
// answered with "run agents find", the command that just failed.
func TestAgentsFindUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{}, {"--name", "a", "--tier", "L1"}, {"--tier", "L7"}} {
		_, errOut, code := runCLI(t, append([]string{"agents", "find", "--data-dir", dir}, args...)...)
		if code != 2 || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("agents find %v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	if out, errOut, code := runCLI(t, "agents", "find", "--data-dir", dir, "--tier", "L0"); code != 0 || out != "no agents\n" {
		t.Errorf("agents find --tier L0 with none: exit %d, %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"--name", "zzz"}, {"--capability", "zzz"}} {
		_, errOut, code := runCLI(t, append([]string{"agents", "find", "--data-dir", dir}, args...)...)
		if code != 1 || !strings.Contains(errOut, "hint: ") || strings.Contains(errOut, "agents find --") {
			t.Errorf("agents find %v with no match: exit %d, %q", args, code, errOut)
		}
	}
}

// TestStatusResetSaysWhatItLeaves: after `status --reset` the status
// counters read 0 while /metrics keeps counting and the recent errors stay
// listed; the help says so, so the user who compares them is not misled.
func TestStatusResetSaysWhatItLeaves(t *testing.T) {
	out, _, _ := runCLI(t, "status", "--help")
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "the /metrics counters never go down") || !strings.Contains(flat, "recent errors stay listed") {
		t.Errorf("status --help does not say what --reset leaves:\n%s", out)
	}
}

// dyingNode listens on dir's API socket as a node that answers the first
// request with a stream holding line, and then dies: the stream ends
// mid-response. The listener closes with the test.
func dyingNode(t *testing.T, dir, line string) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, "nova.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { // ends when it has served, or when the listener closes
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 4096))
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\n\r\n", len(line)+1, line)
		c.Close()
	}()
}

// status shows the MCP and A2A addresses in text too, as a2a call's hints
// send the user to status for the gateway's address.
func TestStatusShowsGatewayAddresses(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, _, code := runCLI(t, "status", "--data-dir", dir)
	info := n.Info()
	if code != 0 || info.A2AURL == "" || !strings.Contains(out, "a2a      "+info.A2AURL+"/a2a/<agent>/") ||
		(info.MCPURL != "" && !strings.Contains(out, "mcp      "+info.MCPURL)) {
		t.Fatalf("status: exit %d, info %+v\n%s", code, info, out)
	}
}
