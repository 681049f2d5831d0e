package main

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/tiers"
)

// TestEscalationHintNamesTheFlag: an L3 -> L0 task proposal without a
// justification is refused (ESCALATION_REQUIRED), and the CLI tells the
// user which flag to pass (--justification), not an envelope field name;
// with the flag it goes through.
func TestEscalationHintNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	l0, l3 := tiers.L0, tiers.L3
	high, low := node.DefaultAgent("high"), node.DefaultAgent("low")
	high.Tier, low.Tier = &l0, &l3
	startNode(t, 0, dir, high, low)
	for _, args := range [][]string{
		{"send", "--data-dir", dir, "--from", "low", "--to", "high", "--type", "task-proposal", "--no-wait", "--payload", `{"task":"review"}`},
		{"tasks", "propose", "--data-dir", dir, "--as", "low", "--to", "high", "--task", "review", "--cap", "echo"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 1 || !strings.Contains(errOut, "ESCALATION_REQUIRED") || !strings.Contains(errOut, "--justification") || strings.Contains(errOut, "escalationJustification") {
			t.Errorf("%v: exit %d, stderr %q; want ESCALATION_REQUIRED and a hint to pass --justification", args[:2], code, errOut)
		}
		out, _, code := runCLI(t, append(args, "--json")...)
		if e := jsonError(t, out); code != 1 || e.Code != "ESCALATION_REQUIRED" || !strings.Contains(e.Hint, "--justification") || strings.Contains(e.Message+e.Hint, "escalationJustification") {
			t.Errorf("%v --json: exit %d, %q", args[:2], code, out)
		}
		if _, errOut, code := runCLI(t, append(args, "--justification", "needs L0 sign-off")...); code != 0 {
			t.Errorf("%v --justification: exit %d, %q", args[:2], code, errOut)
		}
	}
}

// An agent without a handler for requests refuses one with DELIVERY_FAILED;
// the hint says the node is up and what to do, not "is the other node
// running?".
func TestNoHandlerHint(t *testing.T) {
	dir := t.TempDir()
	mute := node.AgentConfig{Name: "mute", Capabilities: []node.CapabilityConfig{{ID: "summarize"}}}
	startNode(t, 0, dir, node.DefaultAgent("talker"), mute)
	_, errOut, code := runCLI(t, "send", "--data-dir", dir, "--from", "talker", "--to", "mute", "--payload", `"hi"`)
	if code != 1 || !strings.Contains(errOut, "DELIVERY_FAILED") || !strings.Contains(errOut, "answers no requests") || strings.Contains(errOut, "is the other node running") {
		t.Fatalf("exit %d, stderr %q; want DELIVERY_FAILED with the no-handler hint", code, errOut)
	}
}

// A capability send whose agent's node went away fails with DELIVERY_FAILED,
// and the hint says that sending again tries the other agents first.
func TestCapabilityDeliveryFailedHint(t *testing.T) {
	_, b, dirA, _ := aliceAndBob(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "send", "--data-dir", dirA, "--from", "alice", "--capability", "echo", "--type", "notification", "--payload", "1")
	if code != 1 || !strings.Contains(errOut, "DELIVERY_FAILED") || !strings.Contains(errOut, "send again") {
		t.Fatalf("exit %d, stderr %q; want DELIVERY_FAILED with the hint to send again", code, errOut)
	}
	// bob's card stays for its TTL; agents says its node is not connected.
	out, _, code := runCLI(t, "agents", "--data-dir", dirA, "--origin", "remote")
	if code != 0 || !strings.Contains(out, "bob") || !strings.Contains(out, "not connected") {
		t.Fatalf("agents after bob's node left: exit %d\n%s", code, out)
	}
}
