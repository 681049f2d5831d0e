package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, out)
	}
	return v
}

// pendingOn waits until the node of dir lists a received pending proposal
// matching f and returns it.
func pendingOn(t *testing.T, dir string, f func(negotiation.Record) bool) negotiation.Record {
	t.Helper()
	var found negotiation.Record
	waitfor.Eventually(t, testnetWait, func() error {
		out, errOut, code := runCLI(t, "tasks", "pending", "--data-dir", dir, "--json")
		if code != 0 {
			return fmt.Errorf("tasks pending: %d %s", code, errOut)
		}
		for _, r := range decodeJSON[[]negotiation.Record](t, out) {
			if r.Direction == negotiation.Received && f(r) {
				found = r
				return nil
			}
		}
		return fmt.Errorf("no such pending proposal yet:\n%s", out)
	})
	return found
}

// TestTasksCommands: alice proposes a task to bob (a config agent, so the
// proposal waits on bob's node), bob's operator accepts it by an id prefix,
// and alice's node sees the answer.
func TestTasksCommands(t *testing.T) {
	_, _, dirA, dirB := aliceAndBob(t)
	out, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dirA, "--to", "bob", "--task", "translate the README",
		"--cap", "echo", "--complexity", "simple", "--deadline", "1m", "--json")
	if code != 0 {
		t.Fatalf("propose: %d %s", code, errOut)
	}
	sent := decodeJSON[negotiation.Record](t, out)
	if sent.Status != negotiation.StatusPending || sent.Direction != negotiation.Sent || sent.Thread != sent.ProposalID {
		t.Fatalf("proposal record %+v", sent)
	}
	got := pendingOn(t, dirB, func(r negotiation.Record) bool { return r.ProposalID == sent.ProposalID })
	if got.Proposal.TaskDescription != "translate the README" || got.Proposal.EstimatedComplexity != negotiation.ComplexitySimple {
		t.Fatalf("received %+v", got.Proposal)
	}
	out, _, _ = runCLI(t, "tasks", "pending", "--data-dir", dirB)
	if !strings.Contains(out, sent.ProposalID) || !strings.Contains(out, "translate the README") || !strings.Contains(out, "tasks accept") {
		t.Fatalf("pending table:\n%s", out)
	}

	// Usage errors exit 2.
	for _, args := range [][]string{
		{"tasks", "propose", "--data-dir", dirA, "--task", "x"},
		{"tasks", "propose", "--data-dir", dirA, "--to", "bob", "--task", "x", "--complexity", "huge"},
		{"tasks", "reject", sent.ProposalID, "--data-dir", dirB},
		{"tasks", "accept", "--data-dir", dirB},
		{"swarm", "create", "--data-dir", dirA, "--task", "x"},
		{"swarm", "status", "--data-dir", dirA},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}

	out, errOut, code = runCLI(t, "tasks", "accept", sent.ProposalID[:10], "--data-dir", dirB, "--eta", "20m")
	if code != 0 || !strings.Contains(out, "accepted "+sent.ProposalID) {
		t.Fatalf("accept by prefix: %d %s %s", code, out, errOut)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		out, _, _ := runCLI(t, "tasks", "show", sent.ProposalID, "--data-dir", dirA, "--json")
		r := decodeJSON[negotiation.Record](t, out)
		if r.Status != negotiation.StatusAccepted || r.EstimatedCompletionMs != 20*60*1000 {
			return fmt.Errorf("alice's record: %s", out)
		}
		return nil
	})
	// Answering twice is refused with the proposal's state.
	_, errOut, code = runCLI(t, "tasks", "reject", sent.ProposalID, "--data-dir", dirB, "--reason", "BUSY")
	if code != 1 || !strings.Contains(errOut, negotiation.CodeWrongState) {
		t.Fatalf("second answer: %d %s", code, errOut)
	}
	out, _, _ = runCLI(t, "tasks", "list", "--data-dir", dirA)
	if !strings.Contains(out, "accepted") {
		t.Fatalf("tasks list:\n%s", out)
	}
}

// TestSwarmCommands: alice's node creates a swarm needing echo; bob's
// operator accepts its proposal; bob's node does the sub-task; swarm status
// shows it completed, on alice's node and, from the shared document, on
// bob's.
func TestSwarmCommands(t *testing.T) {
	_, _, dirA, dirB := aliceAndBob(t)
	out, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dirA, "--task", "echo the greeting",
		"--cap", "echo", "--subtask", "echo: say hello", "--subtask", "echo: say goodbye", "--json")
	if code != 0 {
		t.Fatalf("swarm create: %d %s", code, errOut)
	}
	s := decodeJSON[taskswarm.Swarm](t, out)
	if s.Status != taskswarm.StatusRecruiting || len(s.Recruits) != 1 || len(s.SubTasks) != 2 ||
		s.SubTasks[0].Description != "say hello" || s.SubTasks[0].RequiredCapabilities[0] != "echo" {
		t.Fatalf("created %+v", s)
	}
	prop := pendingOn(t, dirB, func(r negotiation.Record) bool { return r.Proposal.TaskDescription == "echo the greeting" })
	if _, errOut, code := runCLI(t, "tasks", "accept", prop.ProposalID, "--data-dir", dirB); code != 0 {
		t.Fatalf("accept the swarm's proposal: %s", errOut)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		out, errOut, code := runCLI(t, "swarm", "status", s.ID, "--data-dir", dirA, "--json")
		if code != 0 {
			return fmt.Errorf("status: %d %s", code, errOut)
		}
		if got := decodeJSON[taskswarm.Swarm](t, out); got.Status != taskswarm.StatusCompleted || len(got.Results) != 2 {
			return fmt.Errorf("swarm is %s with %d results", got.Status, len(got.Results))
		}
		return nil
	})
	out, _, code = runCLI(t, "swarm", "status", s.ID, "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "2/2") || !strings.Contains(out, "say goodbye") {
		t.Fatalf("status snapshot:\n%s", out)
	}
	// --follow on a finished swarm prints its end and exits 0.
	out, _, code = runCLI(t, "swarm", "status", s.ID, "--data-dir", dirA, "--follow")
	if code != 0 || !strings.Contains(out, "RESULTS") {
		t.Fatalf("status --follow:\n%s", out)
	}
	out, _, _ = runCLI(t, "swarm", "list", "--data-dir", dirA)
	if !strings.Contains(out, s.ID) || !strings.Contains(out, "completed") {
		t.Fatalf("swarm list:\n%s", out)
	}
	// Bob's node does not coordinate it: it reads the shared document.
	waitfor.Eventually(t, testnetWait, func() error {
		out, errOut, code := runCLI(t, "swarm", "status", s.ID, "--data-dir", dirB, "--json")
		if code != 0 {
			return fmt.Errorf("status on bob's node: %d %s", code, errOut)
		}
		if got := decodeJSON[taskswarm.Swarm](t, out); got.Status != taskswarm.StatusCompleted || len(got.SubTasks) != 2 {
			return fmt.Errorf("bob's node sees %s", got.Status)
		}
		return nil
	})
	if _, errOut, code := runCLI(t, "swarm", "status", "swarm-nope", "--data-dir", dirA); code != 1 || !strings.Contains(errOut, taskswarm.CodeSwarmNotFound) {
		t.Fatalf("unknown swarm: %d %s", code, errOut)
	}
	// No capable agent: the code says so.
	if _, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dirA, "--task", "x", "--cap", "translate.klingon"); code != 1 ||
		!strings.Contains(errOut, taskswarm.CodeCapabilityNotFound) {
		t.Fatalf("no capable agent: %d %s", code, errOut)
	}
}

// TestTaskErrorsSpeakCLI: unknown ids name the CLI commands that list
// them (not Go methods) in a hint; a second accept says the proposal is
// already accepted; a swarm whose proposals expire unanswered fails at
// --recruit-timeout saying who must accept, and the receiver lists the
// proposal as timed-out.
func TestTaskErrorsSpeakCLI(t *testing.T) {
	_, _, dirA, dirB := aliceAndBob(t)
	for _, args := range [][]string{{"tasks", "show", "nope"}, {"tasks", "accept", "nope"}, {"swarm", "status", "nope"}} {
		_, errOut, code := runCLI(t, append(args, "--data-dir", dirA)...)
		want := "`nova-node tasks list`"
		if args[0] == "swarm" {
			want = "`nova-node swarm list`"
		}
		if code != 1 || strings.Contains(errOut, "List") || !strings.Contains(errOut, "\nhint: ") || !strings.Contains(errOut, want) {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, errOut)
		}
	}

	out, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dirA, "--to", "bob", "--task", "twice", "--json")
	if code != 0 {
		t.Fatalf("propose: %d %s", code, errOut)
	}
	sent := decodeJSON[negotiation.Record](t, out)
	pendingOn(t, dirB, func(r negotiation.Record) bool { return r.ProposalID == sent.ProposalID })
	for i, id := range []string{sent.ProposalID[:8], sent.ProposalID[:8], sent.ProposalID} {
		_, errOut, code := runCLI(t, "tasks", "accept", id, "--data-dir", dirB)
		if i == 0 {
			if code != 0 {
				t.Fatalf("accept: %d %s", code, errOut)
			}
			continue
		}
		if code != 1 || !strings.Contains(errOut, "is already accepted") || !strings.Contains(errOut, negotiation.CodeWrongState) ||
			!strings.Contains(errOut, "\nhint: ") {
			t.Errorf("accept %s again: exit %d, stderr:\n%s", id, code, errOut)
		}
	}

	start := time.Now()
	out, errOut, code = runCLI(t, "swarm", "create", "--data-dir", dirA, "--task", "nobody answers", "--cap", "echo",
		"--recruit-timeout", "1500ms", "--wait")
	if code != 1 || time.Since(start) > 20*time.Second || !strings.Contains(out, "tasks accept") ||
		!strings.Contains(errOut, "SWARM_FAILED") || !strings.Contains(errOut, "--recruit-timeout") {
		t.Fatalf("swarm create --recruit-timeout --wait: exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(start), out, errOut)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		out, _, _ := runCLI(t, "tasks", "list", "--data-dir", dirB, "--json")
		for _, r := range decodeJSON[[]negotiation.Record](t, out) {
			if r.Proposal.TaskDescription == "nobody answers" && r.Status == negotiation.StatusTimedOut {
				return nil
			}
		}
		return fmt.Errorf("bob's node does not list the swarm's proposal as timed-out:\n%s", out)
	})
	if _, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dirA, "--task", "x", "--cap", "echo", "--recruit-timeout", "-1s"); code != 2 {
		t.Errorf("negative --recruit-timeout: exit %d %s", code, errOut)
	}
}

func TestTasksHelpTeaches(t *testing.T) {
	for _, cmd := range [][]string{{"tasks"}, {"tasks", "propose"}, {"tasks", "accept"}, {"tasks", "reject"}, {"tasks", "pending"},
		{"swarm"}, {"swarm", "create"}, {"swarm", "status"}, {"swarm", "list"}, {"demo"}} {
		out, _, code := runCLI(t, append(cmd, "--help")...)
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "nova-node "+strings.Join(cmd, " ")) {
			t.Errorf("%v --help should teach with examples:\n%s", cmd, out)
		}
	}
}
