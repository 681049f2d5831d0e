package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// TestSwarmCreateRecruitTimeoutRange: a --recruit-timeout below 1s (which
// made the swarm fail at creation or at once, at random) or above 7 days
// is a usage error with a hint; days are accepted, an unknown unit is a
// usage error naming the units.
func TestSwarmCreateRecruitTimeoutRange(t *testing.T) {
	dir := t.TempDir() // no node needed: refused before
	for _, v := range []string{"1ms", "999ms", "8d", "169h"} {
		_, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dir, "--task", "x", "--cap", "echo", "--recruit-timeout", v)
		if code != 2 || !strings.Contains(errOut, "(USAGE)") || !strings.Contains(errOut, "\nhint: ") || !strings.Contains(errOut, "1s up to 7d") {
			t.Errorf("--recruit-timeout %s: exit %d, stderr:\n%s", v, code, errOut)
		}
	}
	_, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dir, "--task", "x", "--cap", "echo", "--recruit-timeout", "8x")
	if code != 2 || !strings.Contains(errOut, "units: ms, s, m, h, d") {
		t.Errorf("--recruit-timeout 8x: exit %d, stderr:\n%s", code, errOut)
	}
	// 2d is in range: the command goes on to the node (none here).
	_, errOut, code = runCLI(t, "swarm", "create", "--data-dir", dir, "--task", "x", "--cap", "echo", "--recruit-timeout", "2d")
	if code != 1 || !strings.Contains(errOut, codeNoNode) {
		t.Errorf("--recruit-timeout 2d: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestSwarmFailedAtCreation: a swarm returned failed by create (without
// --wait) exits 1 with SWARM_FAILED, its reason and a hint, not 0.
func TestSwarmFailedAtCreation(t *testing.T) {
	var out bytes.Buffer
	g := &globals{stdout: &out, stderr: &out}
	s := taskswarm.Swarm{ID: "swarm-1", Status: taskswarm.StatusFailed, Error: "no agent accepted",
		Recruits: []taskswarm.Recruit{{Agent: "bob", Status: taskswarm.RecruitTimedOut}}}
	err := swarmFailed(g, s)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || ee.hint == "" || codeOf(err, 1) != codeSwarmFailed ||
		!strings.Contains(err.Error(), "no agent accepted") {
		t.Fatalf("swarmFailed: %#v", err)
	}
}

// TestSwarmStatusByPrefix: swarm status takes a unique prefix of a swarm
// id, as its usage says; an ambiguous one is a usage error listing the
// matches.
func TestSwarmStatusByPrefix(t *testing.T) {
	_, _, dirA, _ := aliceAndBob(t)
	var ids []string
	for i := range 2 {
		out, errOut, code := runCLI(t, "swarm", "create", "--data-dir", dirA, "--task", fmt.Sprintf("prefix %d", i), "--cap", "echo", "--json")
		if code != 0 {
			t.Fatalf("swarm create: %d %s", code, errOut)
		}
		ids = append(ids, decodeJSON[taskswarm.Swarm](t, out).ID)
	}
	n := len("swarm-")
	for ids[0][:n+1] == ids[1][:n+1] && n < len(ids[0])-1 && ids[0][:n+2] == ids[1][:n+2] {
		n++
	}
	prefix := ids[0][:n+2] // unique
	out, errOut, code := runCLI(t, "swarm", "status", prefix, "--data-dir", dirA, "--json")
	if code != 0 || decodeJSON[taskswarm.Swarm](t, out).ID != ids[0] {
		t.Fatalf("swarm status %s: %d %s %s", prefix, code, out, errOut)
	}
	_, errOut, code = runCLI(t, "swarm", "status", "swarm-", "--data-dir", dirA)
	if code != 2 || !strings.Contains(errOut, ids[0]) || !strings.Contains(errOut, ids[1]) || !strings.Contains(errOut, "\nhint: ") {
		t.Fatalf("ambiguous prefix: %d %s", code, errOut)
	}
}

// TestProposerSideOfTasks: on the node that sent a proposal, accepting it
// says the target's node answers it (not "no received proposal"), and
// tasks pending does not invite answering it.
func TestProposerSideOfTasks(t *testing.T) {
	_, _, dirA, dirB := aliceAndBob(t)
	out, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dirA, "--to", "bob", "--task", "mine", "--deadline", "3d", "--json")
	if code != 0 {
		t.Fatalf("propose: %d %s", code, errOut)
	}
	sent := decodeJSON[negotiation.Record](t, out)
	pendingOn(t, dirB, func(r negotiation.Record) bool { return r.ProposalID == sent.ProposalID })
	for _, id := range []string{sent.ProposalID[:8], sent.ProposalID} {
		_, errOut, code := runCLI(t, "tasks", "accept", id, "--data-dir", dirA)
		if code != 1 || !strings.Contains(errOut, codeProposalSentHere) || !strings.Contains(errOut, "this node sent") ||
			!strings.Contains(errOut, "\nhint: ") || strings.Contains(errOut, "no received proposal") {
			t.Errorf("accept %s on the proposer's node: exit %d, stderr:\n%s", id, code, errOut)
		}
	}
	out, _, _ = runCLI(t, "tasks", "pending", "--data-dir", dirA)
	if strings.Contains(out, "answer a received one") || !strings.Contains(out, "sent ones wait") {
		t.Errorf("tasks pending on the proposer's node:\n%s", out)
	}
	// The deadline is 3 days away: the table shows its date.
	if want := time.UnixMilli(sent.Proposal.DeadlineMs).Local().Format("2006-01-02 15:04"); !strings.Contains(out, want) {
		t.Errorf("tasks pending should show the answer-by date %s:\n%s", want, out)
	}
	out, _, _ = runCLI(t, "tasks", "pending", "--data-dir", dirB)
	if !strings.Contains(out, "answer a received one") || strings.Contains(out, "sent ones wait") {
		t.Errorf("tasks pending on the target's node:\n%s", out)
	}
}

// TestProposeDeadlineCap: --deadline above 30 days is a usage error.
func TestProposeDeadlineCap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"2000000h", "31d", "721h"} {
		_, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dir, "--to", "bob", "--task", "x", "--deadline", v)
		if code != 2 || !strings.Contains(errOut, "(USAGE)") || !strings.Contains(errOut, "\nhint: ") {
			t.Errorf("--deadline %s: exit %d, stderr:\n%s", v, code, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "tasks", "propose", "--data-dir", dir, "--to", "bob", "--task", "x", "--deadline", "30d"); code != 1 ||
		!strings.Contains(errOut, codeNoNode) {
		t.Errorf("--deadline 30d: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestHumanDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", 2 * time.Minute: "2m", 90 * time.Minute: "1h30m", 45 * time.Second: "45s",
		0: "0s", 1500 * time.Millisecond: "2s", 250 * time.Millisecond: "250ms", 7 * 24 * time.Hour: "7d", 26*time.Hour + time.Second: "1d2h1s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
	for s, want := range map[string]time.Duration{"8d": 8 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90s": 90 * time.Second, "-1s": -time.Second} {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "8x", "1h2d", "xd"} {
		if _, err := parseDuration(s); err == nil || !strings.Contains(err.Error(), "units: ms, s, m, h, d") {
			t.Errorf("parseDuration(%q): %v", s, err)
		}
	}
	var out bytes.Buffer
	printOutcome(&globals{stdout: &out}, negotiation.Record{Status: negotiation.StatusAccepted, AcceptedBy: "bob", EstimatedCompletionMs: 600_000, Thread: "t"})
	if !strings.Contains(out.String(), "estimated completion 10m;") {
		t.Errorf("printOutcome: %q", out.String())
	}
	if l := recruitingLine(taskswarm.Swarm{Status: taskswarm.StatusRecruiting, RecruitDeadlineMs: time.Now().Add(2*time.Minute + 400*time.Millisecond).UnixMilli(),
		Recruits: []taskswarm.Recruit{{Status: taskswarm.RecruitProposed}}}); !strings.Contains(l, "waiting up to 2m ") {
		t.Errorf("recruitingLine: %q", l)
	}
	now := time.Now()
	if got := clockOrDate(now.UnixMilli()); got != now.Format("15:04:05") {
		t.Errorf("clockOrDate(now) = %q", got)
	}
	later := now.Add(48 * time.Hour)
	if got := clockOrDate(later.UnixMilli()); got != later.Format("2006-01-02 15:04") {
		t.Errorf("clockOrDate(in 2 days) = %q", got)
	}
}

// TestTaskFlagUsagesHaveNoBackquotes: pflag takes a backquoted word of a
// flag's usage as its value name (--recruit-timeout showed "tasks accept").
func TestTaskFlagUsagesHaveNoBackquotes(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage has a backquote: %q", c.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	for _, c := range taskCommands(&globals{}) {
		walk(c)
	}
	out, _, _ := runCLI(t, "swarm", "create", "--help")
	if !regexp.MustCompile(`--recruit-timeout duration +how long`).MatchString(out) {
		t.Errorf("swarm create --help:\n%s", out)
	}
}
