package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/internal/demo"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

func newSwarmCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "swarm",
		Short: "Run a task as a swarm of capable agents across the mesh",
		Long: `swarm runs one task with several agents, coordinated by this node (any node
can coordinate; there is no central server). ` + "`swarm create`" + ` proposes the task to
every agent, local or remote, whose card lists one of the required
capabilities; when they have answered, it splits the work into sub-tasks and
assigns them to the acceptors by capability and current load, each getting
at least one. Results come back in each agent's task thread.

A sub-task that fails, or whose agent's node leaves the mesh, is reassigned
to another capable agent; when none remains, the L0 agent is notified and
the swarm fails. Status goes recruiting -> active -> completing -> completed
(or failed), each step an event (` + "`nova-node events`" + `).

The swarm's state is also a replicated document named after the swarm id,
which every node can read and watch: ` + "`nova-node crdt watch <swarm id>`" + `.
A coordinating node that restarts resumes its swarms from its store.`,
		Example: `  nova-node swarm create --task "ship the release notes generator" \
      --cap code.write --cap code.review --cap docs.write --wait
  nova-node swarm create --task "audit the API" --cap security.audit --cap code.review \
      --subtask "security.audit: audit the auth endpoints" \
      --subtask "code.review: review the session handling" --as sun
  nova-node swarm status swarm-3f2a...
  nova-node swarm list --json`,
		Args: noArgs,
	}
	c.AddCommand(newSwarmCreateCmd(g), newSwarmStatusCmd(g), newSwarmListCmd(g))
	return c
}

var capPrefixRe = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9_.\-]*(?:\s*,\s*[A-Za-z0-9][A-Za-z0-9_.\-]*)*)\s*:\s*(\S.*)$`)

// parseSubTask reads "[CAP[,CAP...]:] DESCRIPTION": a leading list of the
// swarm's capabilities followed by a colon names what the sub-task needs.
func parseSubTask(s string, caps []string) localapi.SubTaskRequest {
	if m := capPrefixRe.FindStringSubmatch(s); m != nil {
		var need []string
		for _, c := range strings.Split(m[1], ",") {
			need = append(need, strings.TrimSpace(c))
		}
		all := true
		for _, c := range need {
			all = all && slices.Contains(caps, c)
		}
		if all {
			return localapi.SubTaskRequest{Description: m[2], Capabilities: need}
		}
	}
	return localapi.SubTaskRequest{Description: strings.TrimSpace(s)}
}

func newSwarmCreateCmd(g *globals) *cobra.Command {
	var req localapi.CreateSwarmRequest
	var subtasks []string
	var complexity string
	var wait bool
	var recruitTimeout durationFlag
	c := &cobra.Command{
		Use:   "create",
		Short: "Start a swarm: propose the task to capable agents, split and assign it",
		Long: `create starts a swarm coordinated by this node, as one of its agents (--as,
default its first agent). --cap lists the required capabilities (at least
one). Without --subtask there is one sub-task per capability; each --subtask
is "DESCRIPTION", or "CAP[,CAP]: DESCRIPTION" to say which of the swarm's
capabilities it needs. With --wait it follows the swarm until it ends: exit
0 when completed, 1 when failed.

The proposed agents have --recruit-timeout (default 30s) to answer. A node
started with ` + "`nova-node run`" + ` leaves proposals to its operator, who
answers with ` + "`nova-node tasks accept ID`" + ` on that node (` + "`tasks pending`" + `
there lists them): give such agents minutes, not seconds. A
proposal not answered in time expires on both nodes (` + "`tasks list`" + ` shows it
timed-out), and the swarm goes on with the agents that accepted, or fails
when none did.`,
		Example: `  nova-node swarm create --task "ship the release notes generator" --cap code.write --cap docs.write
  nova-node swarm create --task "port the CLI" --cap code.write --cap test.write \
      --subtask "code.write: port the commands" --subtask "test.write: port the tests" \
      --recruit-timeout 10m --wait
  nova-node swarm create --as callisto --task "final review" --cap review.approve \
      --justification "the release needs L0 sign-off" --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(req.Task) == "" {
				return usage(cmd, "--task is required: what the swarm should do")
			}
			if len(req.Capabilities) == 0 {
				return usage(cmd, "give at least one --cap: the capabilities the work needs")
			}
			if complexity != "" {
				req.Complexity = negotiation.Complexity(complexity)
				if !req.Complexity.Valid() {
					return usage(cmd, fmt.Sprintf("--complexity must be simple, medium or complex, not %q", complexity))
				}
			}
			if rt := time.Duration(recruitTimeout); cmd.Flags().Changed("recruit-timeout") &&
				(rt < localapi.MinRecruitTimeout || rt > localapi.MaxRecruitTimeout) {
				return usageHint(fmt.Sprintf("--recruit-timeout %s is out of range: give %s up to %s (7 days)",
					humanDuration(rt), humanDuration(localapi.MinRecruitTimeout), humanDuration(localapi.MaxRecruitTimeout)),
					"give the proposed agents time to answer, like 30s, or 10m when an operator answers with `nova-node tasks accept` "+
						"on their node; leave --recruit-timeout out for the node's default (30s)")
			}
			// Whole milliseconds, rounded up.
			req.RecruitTimeoutMs = int64((time.Duration(recruitTimeout) + time.Millisecond - 1) / time.Millisecond)
			for _, s := range subtasks {
				req.SubTasks = append(req.SubTasks, parseSubTask(s, req.Capabilities))
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			s, err := cl.CreateSwarm(cmd.Context(), req)
			if err != nil && s.ID == "" {
				return err
			}
			if err != nil || !wait {
				if err != nil || s.Status == taskswarm.StatusFailed {
					// Failed at creation: no proposal could be sent, or
					// every one was answered or expired before create
					// returned. Either way, exit 1 with the reason.
					if !g.json {
						fmt.Fprintf(g.stdout, "swarm %s %s: proposed to %s, %s\n", s.ID, s.Status, plural(len(s.Recruits), "capable agent"), plural(len(s.SubTasks), "sub-task"))
					}
					if err == nil {
						return swarmFailed(g, s)
					}
					return &exitError{code: 1, err: err, result: s, hint: fmt.Sprintf("the swarm failed at creation, before any agent "+
						"could answer: the reason is above; `nova-node swarm status %s%s` shows its recruits", s.ID, dataDirFlag(g))}
				}
				if g.json {
					return g.printJSON(s)
				}
				fmt.Fprintf(g.stdout, "swarm %s %s: proposed to %s, %s\n", s.ID, s.Status, plural(len(s.Recruits), "capable agent"), plural(len(s.SubTasks), "sub-task"))
				if l := recruitingLine(s); l != "" {
					fmt.Fprintln(g.stdout, l)
				}
				fmt.Fprintf(g.stdout, "follow it: nova-node swarm status %s%s\n", s.ID, dataDirFlag(g))
				return nil
			}
			return followSwarm(cmd, g, cl, s.ID)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Task, "task", "", "what the swarm should do")
	f.StringArrayVar(&req.Capabilities, "cap", nil, "required capability id (repeatable, at least one)")
	f.StringArrayVar(&subtasks, "subtask", nil, `sub-task "DESCRIPTION" or "CAP[,CAP]: DESCRIPTION" (repeatable)`)
	f.StringVar(&req.As, "as", "", "local agent creating the swarm (default: the node's first agent)")
	f.StringVar(&req.Justification, "justification", "", "escalation justification sent with every proposal (L2/L3 to L0/L1)")
	f.StringVar(&complexity, "complexity", "", "simple, medium (default) or complex")
	f.BoolVar(&wait, "wait", false, "follow the swarm until it ends (exit 1 if it fails)")
	f.Var(&recruitTimeout, "recruit-timeout", "how long the proposed agents have to answer, 1s to 7d (default: the node's, 30s); "+
		"an operator answering with tasks accept needs minutes")
	return c
}

func newSwarmStatusCmd(g *globals) *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "status ID",
		Short: "Show a swarm's progress: live with a progress bar on a terminal",
		Long: `status shows a swarm: its status, progress, participants and each sub-task.
On a terminal it stays live, with a progress bar, until the swarm is
completed or failed; --follow does the same when the output is not a
terminal (one line per change); --json prints one snapshot. On a node that
does not coordinate the swarm, the state comes from its replicated
document.`,
		Example: `  nova-node swarm status swarm-3f2a...
  nova-node swarm status swarm-3f2a... --json
  nova-node swarm status swarm-3f2a... --follow | tee swarm.log`,
		Args: oneID("status"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			id, err := resolveSwarm(cmd, cl, args[0])
			if err != nil {
				return err
			}
			if g.json || !(follow || isTerminal(g.stdout)) {
				s, err := cl.Swarm(cmd.Context(), id)
				if err != nil {
					return swarmErr(err)
				}
				if g.json {
					return g.printJSON(s)
				}
				printSwarm(g.stdout, s)
				return nil
			}
			return swarmErr(followSwarm(cmd, g, cl, id))
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing changes until the swarm ends, even when not on a terminal")
	return c
}

func newSwarmListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the swarms this node coordinates",
		Example: "  nova-node swarm list\n  nova-node swarm list --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			list, err := cl.Swarms(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(g.stdout, "no swarms: start one with `nova-node swarm create`")
				return nil
			}
			fmt.Fprintf(g.stdout, "%-38s %-10s %-9s %-8s %s\n", "ID", "STATUS", "PROGRESS", "AGENTS", "TASK")
			for _, s := range list {
				done, total := progress(s)
				fmt.Fprintf(g.stdout, "%-38s %-10s %-9s %-8d %s\n", s.ID, s.Status, fmt.Sprintf("%d/%d", done, total), len(s.Participants), demo.Clip(s.TaskDescription, 50))
			}
			return nil
		},
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func progress(s taskswarm.Swarm) (done, total int) {
	for _, st := range s.SubTasks {
		if st.Status == taskswarm.SubTaskCompleted {
			done++
		}
	}
	return done, len(s.SubTasks)
}

func bar(done, total, width int) string {
	if total == 0 {
		return "[" + strings.Repeat("-", width) + "]"
	}
	n := done * width / total
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

// printSwarm prints a snapshot.
func printSwarm(w io.Writer, s taskswarm.Swarm) {
	done, total := progress(s)
	fmt.Fprintf(w, "swarm    %s\ntask     %s\ncreator  %s\nstatus   %s %s %d/%d\n", s.ID, s.TaskDescription, shortAddr(s.Creator),
		s.Status, bar(done, total, 20), done, total)
	if s.Error != "" {
		fmt.Fprintf(w, "error    %s\n", s.Error)
	}
	var parts []string
	for _, p := range s.Participants {
		parts = append(parts, shortAddr(p))
	}
	fmt.Fprintf(w, "agents   %s\n", strings.Join(parts, ", "))
	accepted := 0
	for _, r := range s.Recruits {
		if r.Status == taskswarm.RecruitAccepted || r.Status == taskswarm.RecruitReleased || r.Status == taskswarm.RecruitDropped {
			accepted++
		}
	}
	fmt.Fprintf(w, "recruits %d proposed, %d accepted\n\nSUB-TASKS\n", len(s.Recruits), accepted)
	for _, st := range s.SubTasks {
		fmt.Fprintf(w, "  %-6s %-10s %-24s attempt %d  %s\n", st.ID, st.Status, shortAddr(st.AssignedAgent), st.Attempts, demo.Clip(st.Description, 50))
		if st.Error != "" && st.Status != taskswarm.SubTaskCompleted {
			fmt.Fprintf(w, "         last error: %s\n", demo.Clip(st.Error, 100))
		}
		if r := s.Results[st.ID]; len(r) > 0 {
			fmt.Fprintf(w, "         result: %s\n", demo.Clip(demo.ResultText(r), 100))
		}
	}
}

// followSwarm follows a swarm until it ends: on a terminal, changes scroll
// above a progress bar redrawn in place; otherwise one line per change.
// With --json it prints the final state. Exit 1 when the swarm failed.
func followSwarm(cmd *cobra.Command, g *globals, cl *localapi.Client, id string) error {
	tty := isTerminal(g.stdout) && !g.json
	seen := map[string]string{}
	var last taskswarm.Swarm
	lastStatus := taskswarm.Status("")
	barShown := false
	clear := func() {
		if barShown {
			fmt.Fprint(g.stdout, "\r\033[K")
			barShown = false
		}
	}
	err := cl.FollowSwarm(cmd.Context(), id, func(s taskswarm.Swarm) error {
		last = s
		if g.json {
			return nil
		}
		var lines []string
		if s.Status != lastStatus {
			if lastStatus == "" {
				lines = append(lines, fmt.Sprintf("swarm %s: %s (proposed to %s, %s)", s.ID, s.Status, plural(len(s.Recruits), "agent"), plural(len(s.SubTasks), "sub-task")))
				if l := recruitingLine(s); l != "" {
					lines = append(lines, l)
				}
			} else {
				lines = append(lines, fmt.Sprintf("status %s -> %s", lastStatus, s.Status))
			}
			lastStatus = s.Status
		}
		for _, st := range s.SubTasks {
			key := fmt.Sprintf("%s/%d/%s", st.Status, st.Attempts, st.AssignedAgent)
			if seen[st.ID] == key {
				continue
			}
			seen[st.ID] = key
			switch st.Status {
			case taskswarm.SubTaskRunning:
				lines = append(lines, fmt.Sprintf("  %s -> %s (attempt %d): %s", st.ID, shortAddr(st.AssignedAgent), st.Attempts, demo.Clip(st.Description, 60)))
			case taskswarm.SubTaskCompleted:
				lines = append(lines, fmt.Sprintf("  %s done by %s: %s", st.ID, shortAddr(st.AssignedAgent), demo.Clip(demo.ResultText(s.Results[st.ID]), 70)))
			case taskswarm.SubTaskPending:
				if st.Error != "" {
					lines = append(lines, fmt.Sprintf("  %s failed, being reassigned: %s", st.ID, demo.Clip(st.Error, 70)))
				}
			case taskswarm.SubTaskFailed:
				lines = append(lines, fmt.Sprintf("  %s escalated: %s", st.ID, demo.Clip(st.Error, 70)))
			}
		}
		clear()
		for _, l := range lines {
			fmt.Fprintln(g.stdout, l)
		}
		if tty && !s.Status.Terminal() {
			done, total := progress(s)
			fmt.Fprintf(g.stdout, "%s %s %d/%d sub-tasks", s.Status, bar(done, total, 30), done, total)
			barShown = true
		}
		return nil
	})
	clear()
	if err != nil {
		return err
	}
	if last.Status == taskswarm.StatusFailed {
		if !g.json {
			done, total := progress(last)
			fmt.Fprintf(g.stdout, "%s %s %d/%d sub-tasks\n", last.Status, bar(done, total, 30), done, total)
		}
		return swarmFailed(g, last)
	}
	if g.json {
		if err := g.printJSON(last); err != nil {
			return err
		}
	} else if last.Status.Terminal() {
		done, total := progress(last)
		fmt.Fprintf(g.stdout, "%s %s %d/%d sub-tasks\n", last.Status, bar(done, total, 30), done, total)
		if last.Status == taskswarm.StatusCompleted {
			fmt.Fprintln(g.stdout, "\nRESULTS")
			for _, st := range last.SubTasks {
				fmt.Fprintf(g.stdout, "  %s %s\n", st.ID, demo.ResultText(last.Results[st.ID]))
			}
		}
	}
	return nil
}

// swarmFailed is the failure (exit 1, SWARM_FAILED) of swarm s, which
// failed, with its reason and advice.
func swarmFailed(g *globals, s taskswarm.Swarm) error {
	hint := fmt.Sprintf("`nova-node swarm status %s%s` shows each sub-task and its last error", s.ID, dataDirFlag(g))
	if len(s.Participants) == 0 && slices.ContainsFunc(s.Recruits, func(r taskswarm.Recruit) bool { return r.Status == taskswarm.RecruitTimedOut }) {
		hint = "the proposals expired unanswered: a node started with `nova-node run` waits for its operator to run " +
			"`nova-node tasks accept ID` there (`nova-node tasks pending` lists them); create the swarm again with a longer --recruit-timeout, like 10m"
	}
	reason := s.Error
	if reason == "" {
		reason = "no reason recorded"
	}
	return &exitError{code: 1, result: s, err: &codedError{codeSwarmFailed, fmt.Sprintf("swarm %s failed: %s", s.ID, reason)}, hint: hint}
}

// resolveSwarm expands a unique prefix of the id of a swarm this node
// coordinates; anything else is left for the node to look up (a swarm
// coordinated elsewhere is found by its full id). A prefix of several is
// a usage error listing them.
func resolveSwarm(cmd *cobra.Command, cl *localapi.Client, prefix string) (string, error) {
	list, err := cl.Swarms(cmd.Context())
	if err != nil {
		return "", err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	id, several := uniquePrefix(ids, prefix)
	if several != nil {
		return "", usageHint(fmt.Sprintf("%q matches %d swarms (%s): give more of the id", prefix, len(several), strings.Join(several, ", ")),
			"`nova-node swarm list` lists the swarms this node coordinates with their full ids")
	}
	return id, nil
}

// recruitingLine says, for a swarm still recruiting, how long the proposed
// agents have to answer and who answers for them; "" otherwise.
func recruitingLine(s taskswarm.Swarm) string {
	waiting := 0
	for _, r := range s.Recruits {
		if r.Status == taskswarm.RecruitProposing || r.Status == taskswarm.RecruitProposed {
			waiting++
		}
	}
	if s.Status != taskswarm.StatusRecruiting || waiting == 0 {
		return ""
	}
	left := time.Until(time.UnixMilli(s.RecruitDeadlineMs)).Round(time.Second)
	return fmt.Sprintf("waiting up to %s (until %s) for %s to accept: a node started with `nova-node run` waits for its operator "+
		"to run `nova-node tasks accept ID` there (`nova-node tasks pending` lists them)",
		humanDuration(max(left, 0)), clockOrDate(s.RecruitDeadlineMs), plural(waiting, "agent"))
}

// swarmErr adds a hint to an unknown swarm's SWARM_NOT_FOUND.
func swarmErr(err error) error {
	if err != nil && codeOf(err, 1) == taskswarm.CodeSwarmNotFound {
		return &exitError{code: 1, err: err, hint: "`nova-node swarm list` lists the swarms this node coordinates; " +
			"a swarm coordinated elsewhere is found by its full id (swarm-...), once its document reached this node"}
	}
	return err
}

// codeSwarmFailed is the code of a swarm followed to its end (--wait) that
// failed.
const codeSwarmFailed = "SWARM_FAILED"

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
