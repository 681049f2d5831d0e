package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/demo"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/testnet"
)

// TestDemo runs `nova-node demo --json` as CI does: exit 0, and a summary
// showing each step behaved (discovery, refusals, the swarm with its
// reassignment, the shared state), with everything cleaned up.
func TestDemo(t *testing.T) {
	out, errOut, code := runCLI(t, "demo", "--json")
	if code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", code, errOut, out)
	}
	var sum demo.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if !sum.OK || sum.Agents != 21 || len(sum.Nodes) != demo.NodeCount {
		t.Fatalf("summary %+v", sum)
	}
	for _, n := range sum.Nodes {
		if n.Sees != 21 {
			t.Fatalf("%s knows %d agents, want 21", n.Name, n.Sees)
		}
	}
	var codes []string
	for _, r := range sum.Refusals {
		codes = append(codes, r.Code)
	}
	if strings.Join(codes, ",") != "ESCALATION_REQUIRED,TIER_VIOLATION" || sum.Escalation == nil || sum.Escalation.Status != "accepted" {
		t.Fatalf("tier steps: refusals %v, escalation %+v", codes, sum.Escalation)
	}
	s := sum.Swarm
	if s == nil || s.Status != taskswarm.StatusCompleted || len(s.Results) != 4 || s.SubTasks != 4 || s.SharedStatus != taskswarm.StatusCompleted {
		t.Fatalf("swarm %+v", s)
	}
	if len(s.Reassigned) != 1 || s.Reassigned[0].From != "mars" || s.Reassigned[0].To == "mars" {
		t.Fatalf("reassignments %+v, want mars's sub-task moved once", s.Reassigned)
	}
	if s.Proposed != 16 || s.Accepted < 16 {
		t.Fatalf("proposed to %d, %d accepted; want the 16 agents with a needed capability", s.Proposed, s.Accepted)
	}
	if _, err := os.Stat(sum.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("data dir %s left behind (%v)", sum.DataDir, err)
	}
	testnet.CheckLeaks(t)
}

// TestDemoScreen checks the human screen tells the story in order.
func TestDemoScreen(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo a second time")
	}
	out, errOut, code := runCLI(t, "demo")
	if code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", code, errOut, out)
	}
	last := 0
	for _, want := range []string{
		"1. Nodes and discovery", "knows all 21 agents",
		"2. Tier rules", "ESCALATION_REQUIRED", "sun accepted", "TIER_VIOLATION",
		"3. A swarm", "task-proposal sent to the 16 agents", "16 accepted", "status recruiting → active",
		"failed on mars", "reassigned to", "status completing → completed",
		"4. Shared state", "/status        completed",
		"5. Final aggregate", "Done in",
	} {
		i := strings.Index(out[last:], want)
		if i < 0 {
			t.Fatalf("the screen lacks %q after position %d:\n%s", want, last, out)
		}
		last += i
	}
}
