package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
)

func newBroadcastCmd(g *globals) *cobra.Command {
	var req localapi.SendRequest
	var typ, payload string
	c := &cobra.Command{
		Use:   "broadcast",
		Short: "Send an envelope to every agent of the swarm that may receive it",
		Long: `broadcast publishes one envelope (recipient "*") on the swarm's GossipSub
topic. Every node, this one included, delivers it to each of its agents that
the sender may reach: an L0 agent's directive reaches every tier; other
tiers reach what their tier rules allow, and sandbox rules apply. Messages
are signed by the publishing node; a node that receives a broadcast whose
sender is not hosted by its publisher rejects it and logs a security event.

Nobody can answer a broadcast, so the types that ask for an answer
(request, task-proposal) are refused (USAGE, exit 2): send those
to one agent with ` + "`nova-node send`" + `.`,
		Example: `  nova-node broadcast --payload '"deploy finished"'
  nova-node broadcast --from sun --type notification --payload '{"directive":"pause"}'
  nova-node broadcast --payload @directive.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := envelope.ParseType(typ)
			if err != nil {
				return usageHint(fmt.Sprintf("--type %q is not a message type", typ), "--type is one of: "+broadcastTypeList())
			}
			if err := envelope.CheckBroadcastType(t); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--type %s: a %s asks for an answer, and a broadcast cannot be answered", t, t), hint: fmt.Sprintf("to ask for an answer, send to one agent: `nova-node send --to AGENT --type %s` (or --capability ID); broadcast only types nobody answers, like notification", t)}
			}
			req.Type, req.To = t, envelope.Broadcast
			return sendAndReport(cmd, g, req, payload, func(res localapi.SendResult) {
				if res.Result.Delivered {
					fmt.Fprintf(g.stdout, "broadcast %s published (%.2f ms)\n", res.Sent.ID, res.Result.LatencyMs)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&req.From, "from", "", "local agent broadcasting (default: the node's first agent)")
	f.StringVar(&typ, "type", "notification", "message type (not request or task-proposal: a broadcast is not answered)")
	f.StringVar(&payload, "payload", "", payloadFlagHelp)
	return c
}
