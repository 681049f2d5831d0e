package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/internal/demo"
)

func newDemoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Watch 21 agents on 4 local nodes negotiate and run a swarm task (a few seconds)",
		Long: `demo starts 4 nova nodes in this process, on 127.0.0.1 with ephemeral ports
and a temporary data dir (removed at exit, no mDNS, nothing leaves this
machine). They host the 21 planetary agents of the seed, each with its seed
tier (sun L0; mercury, earth, jupiter L1; venus, mars, pluto, saturn, titan
L2; the rest L3), a few capabilities, and deterministic built-in behaviour.

It then shows, live:
  1. discovery: each node learns every agent's signed card;
  2. tier rules: an L3 agent proposing to the L0 sun without a justification
     is refused (ESCALATION_REQUIRED), with one it is accepted; an L1 agent
     may not start a conversation with an L2 agent (TIER_VIOLATION);
  3. a swarm: sun proposes a task to every agent whose card lists a needed
     capability, the acceptors get the sub-tasks, mars fails its first
     attempt (an injected fault) and its sub-task is reassigned;
  4. the swarm's shared state, a replicated document read on another node;
  5. the aggregated results reported to sun.

Exit status 0 means every step behaved as described. --json prints only a
summary object.`,
		Example: `  nova-node demo
  nova-node demo --json | jq .swarm.status`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var w io.Writer = g.stdout
			if g.json {
				w = io.Discard
			}
			sum, err := demo.Run(cmd.Context(), w)
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("demo: %w", err), result: sum}
			}
			if g.json {
				return g.printJSON(sum)
			}
			return nil
		},
	}
}
