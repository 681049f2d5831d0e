package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/internal/demo"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// taskCommands are the commands of task negotiation, swarms and the demo:
// tasks, swarm, demo.
func taskCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newTasksCmd(g), newSwarmCmd(g), newDemoCmd(g)}
}

func newTasksCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "tasks",
		Short: "Propose tasks to agents, and accept or reject the ones proposed to yours",
		Long: `tasks negotiates work between agents. One agent proposes a task to another
(a "task-proposal" envelope: description, required capabilities, complexity,
and a deadline to answer by). The target accepts (with an estimated
completion time) or rejects (with a reason code such as BUSY and, optionally,
another agent to ask). A proposal not answered by its deadline times out
(PROPOSAL_TIMEOUT) and the proposer is told. Every later message of an
accepted task shares the proposal's correlation thread.

Proposals are kept in the node's store: they survive restarts of either
node. Proposals to the agents of a node from its config file wait in
` + "`tasks pending`" + ` for you to answer them.

Tier rules apply: an L2 or L3 agent proposing to an L0 or L1 agent must give
--justification, or the proposal is refused with ESCALATION_REQUIRED.`,
		Example: `  nova-node tasks propose --to bob --task "translate the README" --cap translate.fr
  nova-node tasks pending
  nova-node tasks accept 3f2a... --eta 20m
  nova-node tasks reject 3f2a... --reason BUSY --alternative carol
  nova-node tasks list --json`,
		Args: noArgs,
	}
	c.AddCommand(newTasksProposeCmd(g), newTasksPendingCmd(g, true), newTasksPendingCmd(g, false),
		newTasksShowCmd(g), newTasksAnswerCmd(g, true), newTasksAnswerCmd(g, false))
	return c
}

func newTasksProposeCmd(g *globals) *cobra.Command {
	var req localapi.ProposeRequest
	var complexity string
	deadline := durationFlag(node.DefaultProposalTimeout)
	var wait bool
	c := &cobra.Command{
		Use:   "propose",
		Short: "Propose a task from a local agent to another agent",
		Long: `propose sends a task proposal from one of this node's agents (--as, default
its first agent) to an agent anywhere in the swarm (--to, a name or
name@peerID), or with --by-capability to the first reachable agent that has
the capability given to --to. It prints the proposal's id, which is also the
task's correlation thread. With --wait it waits for the answer: exit 0 when
accepted, 1 when rejected or timed out.`,
		Example: `  nova-node tasks propose --to bob --task "summarise the logs" --cap text.summarize
  nova-node tasks propose --to sun --as callisto --task "approve the v2 docs" --cap review.approve \
      --justification "release sign-off needs the orchestrator" --wait
  nova-node tasks propose --to code.review --by-capability --task "review PR 42" --deadline 2m --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case req.To == "":
				return usage(cmd, "--to is required: an agent name, name@peerID, or a capability with --by-capability")
			case strings.TrimSpace(req.Task) == "":
				return usage(cmd, "--task is required: what to do")
			case deadline <= 0:
				return usage(cmd, "--deadline must be positive, like 30s or 10m")
			case time.Duration(deadline) > maxProposalDeadline:
				return usageHint(fmt.Sprintf("--deadline %s is too far: a proposal waits at most %s (30 days) for its answer",
					humanDuration(time.Duration(deadline)), humanDuration(maxProposalDeadline)),
					"give a --deadline up to 30d, like 10m, 2h or 3d; a task that takes longer is accepted with a longer --eta")
			}
			if complexity != "" {
				req.Complexity = negotiation.Complexity(complexity)
				if !req.Complexity.Valid() {
					return usage(cmd, fmt.Sprintf("--complexity must be simple, medium or complex, not %q", complexity))
				}
			}
			req.TimeoutMs = time.Duration(deadline).Milliseconds()
			cl, err := g.client()
			if err != nil {
				return err
			}
			rec, err := cl.ProposeTask(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !wait {
				if g.json {
					return g.printJSON(rec)
				}
				fmt.Fprintf(g.stdout, "proposal %s sent: %s -> %s, answer by %s\n", rec.ProposalID, shortAddr(rec.Proposer),
					rec.Target, clockOrDate(rec.Proposal.DeadlineMs))
				return nil
			}
			if !g.json {
				fmt.Fprintf(g.stdout, "proposal %s sent to %s; waiting for the answer...\n", rec.ProposalID, rec.Target)
			}
			rec, err = waitProposal(cmd.Context(), cl, rec.ProposalID)
			if err != nil {
				return err
			}
			if rec.Status != negotiation.StatusAccepted {
				if !g.json {
					printOutcome(g, rec)
				}
				return proposalFailed(rec)
			}
			if g.json {
				return g.printJSON(rec)
			}
			printOutcome(g, rec)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&req.To, "to", "", "agent to propose to (name or name@peerID); a capability with --by-capability")
	f.BoolVar(&req.ByCapability, "by-capability", false, "--to is a capability: the first reachable agent that has it answers")
	f.StringVar(&req.Task, "task", "", "what to do")
	f.StringArrayVar(&req.Capabilities, "cap", nil, "required capability id (repeatable)")
	f.StringVar(&complexity, "complexity", "", "simple, medium (default) or complex")
	f.Var(&deadline, "deadline", "how long the target has to answer, up to 30d (units: s, m, h, d)")
	f.StringVar(&req.From, "as", "", "local agent proposing (default: the node's first agent)")
	f.StringVar(&req.Justification, "justification", "", "escalation justification (L2/L3 proposing to L0/L1)")
	f.BoolVar(&wait, "wait", false, "wait for the answer (exit 1 unless accepted)")
	return c
}

// maxProposalDeadline bounds tasks propose --deadline: an answer due
// further away than this is surely a typo (2000000h), and a proposal is
// kept pending, in both nodes' stores, until then.
const maxProposalDeadline = 30 * 24 * time.Hour

// Codes of a proposal waited for (--wait) that was not accepted.
const codeProposalRejected = "PROPOSAL_REJECTED"

// proposalFailed is the failure (exit 1) of a proposal waited for that was
// not accepted, with rec as its result.
func proposalFailed(rec negotiation.Record) error {
	e := &exitError{code: 1, result: rec}
	switch rec.Status {
	case negotiation.StatusRejected:
		e.err = &codedError{codeProposalRejected, fmt.Sprintf("proposal %s was rejected by %s: %s", rec.ProposalID, rec.AnsweredBy, rec.RejectionReason)}
		e.hint = "propose to another agent: `nova-node agents find --capability ID` lists those that have a capability, and --by-capability lets the first one answer"
		if rec.AlternativeSuggestion != "" {
			e.hint = "the agent suggests: " + rec.AlternativeSuggestion
		}
	case negotiation.StatusTimedOut:
		e.err = &codedError{negotiation.CodeProposalTimeout, fmt.Sprintf("proposal %s got no answer by its deadline", rec.ProposalID)}
		e.hint = "is the target's node running? `nova-node ping AGENT` tells; a longer --deadline gives the agent more time"
	default:
		e.err = fmt.Errorf("proposal %s was %s", rec.ProposalID, rec.Status)
	}
	return e
}

// waitProposal polls a sent proposal until it is decided.
func waitProposal(ctx context.Context, cl *localapi.Client, id string) (negotiation.Record, error) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		rec, err := cl.Task(ctx, id)
		if err != nil {
			return rec, err
		}
		if rec.Terminal() {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-t.C:
		}
	}
}

func printOutcome(g *globals, r negotiation.Record) {
	switch r.Status {
	case negotiation.StatusAccepted:
		fmt.Fprintf(g.stdout, "accepted by %s, estimated completion %s; task thread %s\n", shortAddr(r.AcceptedBy),
			humanDuration(time.Duration(r.EstimatedCompletionMs)*time.Millisecond), r.Thread)
	case negotiation.StatusRejected:
		alt := ""
		if r.AlternativeSuggestion != "" {
			alt = "; try " + r.AlternativeSuggestion
		}
		fmt.Fprintf(g.stdout, "rejected by %s: %s%s\n", shortAddr(r.AnsweredBy), r.RejectionReason, alt)
	case negotiation.StatusTimedOut:
		fmt.Fprintf(g.stdout, "no answer by the deadline: %s\n", negotiation.CodeProposalTimeout)
	default:
		fmt.Fprintf(g.stdout, "%s\n", r.Status)
	}
}

func newTasksPendingCmd(g *globals, pendingOnly bool) *cobra.Command {
	use, short, example := "pending", "List proposals waiting for an answer (received and sent)",
		"  nova-node tasks pending\n  nova-node tasks pending --json"
	if !pendingOnly {
		use, short, example = "list", "List every proposal this node sent or received, with its outcome",
			"  nova-node tasks list\n  nova-node tasks list --json | jq '.[] | select(.status==\"rejected\")'"
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			recs, err := cl.Tasks(cmd.Context(), pendingOnly)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(recs)
			}
			if len(recs) == 0 {
				if pendingOnly {
					fmt.Fprintln(g.stdout, "no pending proposals")
				} else {
					fmt.Fprintln(g.stdout, "no proposals")
				}
				return nil
			}
			fmt.Fprintf(g.stdout, "%-32s %-8s %-9s %-22s %-22s %-16s %s\n", "ID", "DIR", "STATUS", "FROM", "TO", "ANSWER BY", "TASK")
			received, sent := 0, 0
			for _, r := range recs {
				fmt.Fprintf(g.stdout, "%-32s %-8s %-9s %-22s %-22s %-16s %s\n", r.ProposalID, r.Direction, r.Status,
					shortAddr(r.Proposer), shortAddr(r.Target), clockOrDate(r.Proposal.DeadlineMs),
					demo.Clip(r.Proposal.TaskDescription, 60))
				if r.Direction == negotiation.Received {
					received++
				} else {
					sent++
				}
			}
			if pendingOnly {
				fmt.Fprintln(g.stdout)
				if received > 0 {
					fmt.Fprintln(g.stdout, "answer a received one: nova-node tasks accept ID | nova-node tasks reject ID --reason BUSY")
				}
				if sent > 0 {
					fmt.Fprintln(g.stdout, "sent ones wait for the target's node to answer: nova-node tasks show ID follows one")
				}
			}
			return nil
		},
	}
}

func newTasksShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show one proposal",
		Example: "  nova-node tasks show 3f2a9c...\n  nova-node tasks show 3f2a9c... --json",
		Args:    oneID("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			id, err := resolveProposal(cmd.Context(), cl, args[0], false)
			if err != nil {
				return err
			}
			rec, err := cl.Task(cmd.Context(), id)
			if err != nil {
				return proposalErr(cmd.Context(), cl, id, err)
			}
			if g.json {
				return g.printJSON(rec)
			}
			p := rec.Proposal
			fmt.Fprintf(g.stdout, "proposal   %s (%s, thread %s)\nfrom       %s\nto         %s\ntask       %s\nneeds      %s\ncomplexity %s\nanswer by  %s\nstatus     %s\n",
				rec.ProposalID, rec.Direction, rec.Thread, rec.Proposer, rec.Target, p.TaskDescription,
				strings.Join(p.RequiredCapabilities, ", "), p.EstimatedComplexity,
				time.UnixMilli(p.DeadlineMs).Local().Format(time.DateTime), rec.Status)
			if rec.Terminal() {
				printOutcome(g, rec)
			}
			return nil
		},
	}
}

func newTasksAnswerCmd(g *globals, accept bool) *cobra.Command {
	eta := durationFlag(node.DefaultEstimate)
	var req localapi.AnswerRequest
	c := &cobra.Command{
		Use:     "accept ID",
		Short:   "Accept a proposal received by one of this node's agents",
		Example: "  nova-node tasks accept 3f2a9c...\n  nova-node tasks accept 3f2a --eta 2h   # a unique prefix is enough",
		Args:    oneID("accept"),
	}
	if !accept {
		c.Use, c.Short = "reject ID", "Reject a proposal received by one of this node's agents"
		c.Example = "  nova-node tasks reject 3f2a9c... --reason BUSY\n  nova-node tasks reject 3f2a --reason CAPABILITY_MISSING --alternative carol"
		c.Args = oneID("reject")
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if accept {
			if eta <= 0 {
				return usage(cmd, "--eta must be positive, like 10m")
			}
			req.EstimatedCompletionMs = time.Duration(eta).Milliseconds()
		} else if req.Reason == "" {
			return usage(cmd, "--reason is required: a code such as BUSY, CAPABILITY_MISSING or DECLINED")
		}
		cl, err := g.client()
		if err != nil {
			return err
		}
		id, err := resolveProposal(cmd.Context(), cl, args[0], true)
		if err != nil {
			return err
		}
		answer := cl.RejectTask
		if accept {
			answer = cl.AcceptTask
		}
		rec, err := answer(cmd.Context(), id, req)
		if err != nil {
			return proposalErr(cmd.Context(), cl, id, err)
		}
		if g.json {
			return g.printJSON(rec)
		}
		fmt.Fprintf(g.stdout, "%s %s from %s (thread %s)\n", rec.Status, rec.ProposalID, shortAddr(rec.Proposer), rec.Thread)
		return nil
	}
	if accept {
		c.Flags().Var(&eta, "eta", "estimated time to complete the task (units: s, m, h, d)")
	} else {
		c.Flags().StringVar(&req.Reason, "reason", "", "reason code: BUSY, CAPABILITY_MISSING, DECLINED, ... (required)")
		c.Flags().StringVar(&req.Alternative, "alternative", "", "agent better suited to the task")
	}
	return c
}

// resolveProposal expands a unique prefix of a proposal id: among received
// ones when received is set (answering), else among all. When a prefix
// matches several received proposals of which one is pending, that one is
// meant; one that matches only answered proposals resolves too, so that
// the node says what state the proposal is in.
func resolveProposal(ctx context.Context, cl *localapi.Client, prefix string, received bool) (string, error) {
	if len(prefix) >= 32 {
		return prefix, nil
	}
	recs, err := cl.Tasks(ctx, false)
	if err != nil {
		return "", err
	}
	var match, pending, sent []string
	for _, r := range recs {
		if !strings.HasPrefix(r.ProposalID, prefix) || slices.Contains(match, r.ProposalID) {
			continue
		}
		if received && r.Direction != negotiation.Received {
			if !slices.Contains(sent, r.ProposalID) {
				sent = append(sent, r.ProposalID)
			}
			continue
		}
		match = append(match, r.ProposalID)
		if r.Status == negotiation.StatusPending {
			pending = append(pending, r.ProposalID)
		}
	}
	if len(match) > 1 && len(pending) == 1 {
		match = pending
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		if len(sent) == 1 {
			return "", sentHere(sent[0])
		}
		return prefix, nil // let the node say it is not found
	}
	return "", &exitError{code: 2, err: fmt.Errorf("%q matches %d proposals (%s): give more of the id", prefix, len(match), strings.Join(match, ", "))}
}

// proposalErr gives a failure about proposal id, from the node, the CLI's
// words and a hint: where to find the ids, or the state the proposal is in
// when it can no longer be answered.
func proposalErr(ctx context.Context, cl *localapi.Client, id string, err error) error {
	switch codeOf(err, 1) {
	case negotiation.CodeProposalNotFound:
		hint := "`nova-node tasks pending` lists the proposals waiting for an answer, `nova-node tasks list` all of them " +
			"(a unique prefix of an id is enough)"
		if rec, e := cl.Task(ctx, id); e == nil && rec.Direction == negotiation.Sent {
			return sentHere(id)
		}
		return &exitError{code: 1, err: err, hint: hint}
	case negotiation.CodeProposalTimeout:
		return &exitError{code: 1, err: err, hint: "it expired unanswered and can no longer be answered " +
			"(`nova-node tasks list` shows it timed-out): the proposer must send a new proposal"}
	case negotiation.CodeWrongState:
		rec, e := cl.Task(ctx, id)
		if e != nil || rec.Status == negotiation.StatusPending {
			return &exitError{code: 1, err: err, hint: "`nova-node tasks show " + id + "` shows its state"}
		}
		msg := fmt.Sprintf("proposal %s is already %s: it can be answered only once", id, rec.Status)
		hint := "`nova-node tasks show " + id + "` shows the answer"
		switch rec.Status {
		case negotiation.StatusAccepted:
			hint = "nothing to do: it was accepted (`nova-node tasks show " + id + "` shows by whom, and the task thread)"
		case negotiation.StatusTimedOut:
			msg = fmt.Sprintf("proposal %s expired: its deadline passed before it was answered (or its proposer gave up)", id)
			hint = "it can no longer be answered: the proposer must send a new proposal"
		}
		return &exitError{code: 1, err: &codedError{negotiation.CodeWrongState, msg}, hint: hint}
	}
	return err
}

// codeProposalSentHere refuses to answer a proposal that one of this
// node's agents sent: the target's node answers it.
const codeProposalSentHere = "PROPOSAL_SENT_HERE"

// sentHere is the refusal to accept or reject proposal id, which this node
// sent.
func sentHere(id string) error {
	return &exitError{code: 1,
		err: &codedError{codeProposalSentHere, fmt.Sprintf("proposal %s is one this node sent: the target's node answers it, not this one", id)},
		hint: "wait for the answer: `nova-node tasks show " + id + "` shows its state (accepted, rejected or timed-out); " +
			"run `tasks accept` on the target's node, where `nova-node tasks pending` lists it as received"}
}

func oneID(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usage(cmd, fmt.Sprintf("%s takes one id (or a unique prefix of one)", verb))
		}
		return nil
	}
}

// durationFlag is a --deadline, --eta or --recruit-timeout value: a Go
// duration (90s, 10m, 1h30m) or whole days (2d, 1d12h). Its value name in
// help is "duration"; a value it cannot read gets an error that lists the
// units it takes.
type durationFlag time.Duration

func (d *durationFlag) String() string {
	if *d == 0 {
		return "0" // pflag shows no default for it
	}
	return humanDuration(time.Duration(*d))
}
func (d *durationFlag) Type() string { return "duration" }

func (d *durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationFlag(v)
	return nil
}

// parseDuration reads s as time.ParseDuration does, with "d" (24h) also
// accepted as a leading unit: "2d", "1d12h".
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration: give a number and a unit, like 45s, 10m, 1h30m or 2d "+
		"(units: ms, s, m, h, d)", s)
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(strings.TrimPrefix(t, "-"), "+")
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n, err := strconv.ParseInt(t[:i], 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, bad
		}
		days, t = time.Duration(n)*24*time.Hour, t[i+1:]
	}
	var rest time.Duration
	if t != "" {
		var err error
		if rest, err = time.ParseDuration(t); err != nil || rest < 0 {
			return 0, bad
		}
	} else if days == 0 && !strings.HasSuffix(strings.TrimSpace(s), "d") {
		return 0, bad
	}
	d := days + rest
	if neg {
		d = -d
	}
	return d, nil
}

// humanDuration is d for people: 45s, 10m, 1h30m, 2d3h; whole seconds
// (below a second: milliseconds).
func humanDuration(d time.Duration) string {
	if d < 0 {
		return "-" + humanDuration(-d)
	}
	if d < time.Second {
		if d == 0 {
			return "0s"
		}
		return fmt.Sprintf("%dms", (d+time.Millisecond-1)/time.Millisecond)
	}
	d = d.Round(time.Second)
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// clockOrDate is the local time of ms: its clock time when it is today,
// else its date and time ("2026-11-27 00:22").
func clockOrDate(ms int64) string {
	t, now := time.UnixMilli(ms).Local(), time.Now()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}
