package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/tiers"
)

func newSendCmd(g *globals) *cobra.Command {
	var req localapi.SendRequest
	var typ, payload, capability string
	c := &cobra.Command{
		Use:   "send",
		Short: "Send an envelope from a local agent and print the answer",
		Long: `send asks the running node to send one envelope from one of its agents
(--from, default its first agent) to an agent anywhere in the swarm.

--to takes an agent name ("bob"), which must be unique among the agents the
node knows, or a full address ("bob@12D3KooW..."), as ` + "`nova-node agents`" + ` lists.
--capability sends to an agent with that capability other than the
sender (--from) and allowed by the tier and sandbox rules: one of this
node's own first, then one whose grant (or this node's trust) covers the
capability, then the others; within each, one on a node it is connected
to, else one on a node it has not tried, and last one on a node it could
not reach (a node that went away keeps its cards in registries for up to
10 minutes; among those, the one that failed longest ago first). Ties go
by a hash of the address salted per node, so no peer wins by choosing its
agent's name.

A request waits for the answer and prints it; other types print where the
envelope was delivered. Refusals print the seed's error code:
AGENT_NOT_FOUND, TIER_VIOLATION, SANDBOX_VIOLATION, ESCALATION_REQUIRED, ...

Types: ` + typeList() + `.`,
		Example: `  nova-node send --to bob --payload '{"text":"hi"}'
  nova-node send --to bob@12D3KooWAbc... --type notification --payload '"deploy done"'
  nova-node send --capability echo --payload 42
  nova-node send --from venus --to sun --type task-proposal \
      --justification "schema change needs L0 sign-off" --payload '{"task":"review"}'
  nova-node send --to bob --payload '{"n":1}' --json
  nova-node send --to bob --payload @request.json
  jq -c '.items[0]' batch.json | nova-node send --to bob --payload @-`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := envelope.ParseType(typ)
			if err != nil {
				return usageHint(fmt.Sprintf("--type %q is not a message type", typ), "--type is one of: "+typeList())
			}
			req.Type = t
			switch {
			case capability != "" && req.To != "":
				return &exitError{code: 2, err: errors.New("give --to or --capability, not both")}
			case capability != "":
				req.To, req.Capability = capability, true
			case req.To == "":
				return &exitError{code: 2, err: errors.New("--to is required (an agent name or name@peerID; see `nova-node agents`)")}
			}
			return sendAndReport(cmd, g, req, payload, func(res localapi.SendResult) { printSendResult(g, res) })
		},
	}
	f := c.Flags()
	f.StringVar(&req.From, "from", "", "local agent sending (default: the node's first agent)")
	f.StringVar(&req.To, "to", "", "recipient: agent name or name@peerID")
	f.StringVar(&capability, "capability", "", "send to the first agent with this capability instead of --to (see above)")
	f.StringVar(&typ, "type", "request", "message type")
	f.StringVar(&payload, "payload", "", payloadFlagHelp+" (left out: null)")
	f.StringVar(&req.CorrelationID, "correlation-id", "", "thread to attach the envelope to")
	f.StringVar(&req.Justification, "justification", "", "escalation justification (needed for L2/L3 -> L0/L1 task proposals)")
	f.BoolVar(&req.NoWait, "no-wait", false, "for a request: do not wait for the answer")
	return c
}

// sendAndReport sends req (with payload, if given, as its JSON payload)
// through the running node and prints the outcome: JSON with --json, else
// through human. Exit codes: 2 for a payload that is not JSON, 1 for a
// refusal (reported by run: its code on stderr, or with --json as the
// result's "error" member).
func sendAndReport(cmd *cobra.Command, g *globals, req localapi.SendRequest, payload string, human func(localapi.SendResult)) error {
	p, err := readPayload(cmd, payload)
	if err != nil {
		return err
	}
	req.Payload = p
	cl, err := g.client()
	if err != nil {
		return err
	}
	res, err := cl.Send(cmd.Context(), req)
	if err != nil {
		return err
	}
	if res.Error != nil {
		if !g.json {
			human(res)
		}
		return &exitError{code: 1, err: res.Error, result: res}
	}
	if g.json {
		return g.printJSON(res)
	}
	human(res)
	return nil
}

// payloadFlagHelp is the help of every --payload flag.
var payloadFlagHelp = fmt.Sprintf("payload: a JSON value, or @FILE holding one (@- reads stdin); at most %d bytes of compact JSON, nested at most %d deep; empty is an error (pass null)", envelope.MaxPayloadSize, envelope.MaxPayloadDepth)

// readPayload is the payload that --payload gives: none when the flag is
// left out, the JSON value itself, or the JSON value in the file that
// follows "@" ("@-": stdin), at most localapi.MaxSendRequest bytes. Anything
// else is a usage error (exit 2) that names the file: an empty --payload
// (an unset shell variable, likely), JSON that is not, or a payload over
// the envelope's limits (checkPayloadLimits).
func readPayload(cmd *cobra.Command, arg string) (json.RawMessage, error) {
	name, fromFile := strings.CutPrefix(arg, "@")
	switch {
	case arg == "" && cmd.Flags().Changed("payload"):
		return nil, usageHint("--payload is empty (an unset shell variable?)",
			"give a JSON value; for no payload, pass --payload null explicitly, or leave --payload out")
	case arg == "":
		return nil, nil
	case !fromFile:
		if !json.Valid([]byte(arg)) {
			return nil, &exitError{code: 2, err: fmt.Errorf("--payload is not valid JSON: %s (quote strings: '\"text\"')", arg),
				hint: `quote strings ('"text"'), or give a file: --payload @FILE (@- for stdin)`}
		}
		if err := checkPayloadLimits(cmd, "--payload", []byte(arg)); err != nil {
			return nil, err
		}
		return json.RawMessage(arg), nil
	case name == "":
		return nil, usage(cmd, "--payload @ needs a file name: --payload @FILE, or @- for stdin")
	}
	what, r := "stdin", cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the message already
			}
			return nil, &exitError{code: 2, err: fmt.Errorf("--payload @%s: %w", name, err)}
		}
		defer f.Close()
		what, r = "the file", f
	}
	b, err := io.ReadAll(io.LimitReader(r, localapi.MaxSendRequest+1))
	switch {
	case err != nil:
		return nil, &exitError{code: 2, err: fmt.Errorf("--payload @%s: read %s: %w", name, what, err)}
	case len(b) > localapi.MaxSendRequest:
		return nil, &exitError{code: 2, err: fmt.Errorf("--payload @%s: %s is over %d bytes, more than the node takes in one send", name, what, localapi.MaxSendRequest)}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--payload @%s: %s is empty; it must hold one JSON value", name, what)}
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v) // for the reason, and where
		var se *json.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("%w, at byte %d", err, se.Offset)
		}
		return nil, &exitError{code: 2, err: fmt.Errorf("--payload @%s: %s is not valid JSON: %v", name, what, err)}
	}
	if err := checkPayloadLimits(cmd, "--payload @"+name, b); err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

// checkPayloadLimits refuses b, valid JSON given by what, that no envelope
// can carry (envelope.CheckPayload, the rules the node applies): over
// envelope.MaxPayloadSize bytes once compacted (the form it travels in),
// or nested deeper than envelope.MaxPayloadDepth. The node would refuse it
// too, but as a failure with no hint; this is the command line's problem
// (exit 2).
func checkPayloadLimits(cmd *cobra.Command, what string, b []byte) error {
	err := envelope.CheckPayload(b)
	var se *envelope.PayloadSizeError
	var de *envelope.PayloadDepthError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return usageHint(fmt.Sprintf("%s: the payload is %d bytes, over the %d-byte limit of one envelope", what, se.Size, se.Max),
			fmt.Sprintf("a payload is at most %d bytes of compact JSON (envelope.MaxPayloadSize): send a reference (a path or URL) instead, or split it over several sends", se.Max))
	case errors.As(err, &de):
		return usageHint(fmt.Sprintf("%s: the payload is nested %d levels deep, over the limit of %d", what, de.Depth, de.Max),
			fmt.Sprintf("arrays and objects nest at most %d levels deep in a payload (envelope.MaxPayloadDepth): flatten it", de.Max))
	}
	return usage(cmd, fmt.Sprintf("%s: %v", what, err))
}

func typeList() string {
	var s []string
	for _, t := range envelope.Types() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

// broadcastTypeList is typeList without the types a broadcast refuses.
func broadcastTypeList() string {
	var s []string
	for _, t := range envelope.Types() {
		if envelope.CheckBroadcastType(t) == nil {
			s = append(s, string(t))
		}
	}
	return strings.Join(s, ", ")
}

func printSendResult(g *globals, res localapi.SendResult) {
	r := res.Result
	if r.Delivered {
		// A notification's latency runs to its acknowledgement; a
		// request's routing latency ends when it is queued, so what tells
		// how long delivery took is the time to its answer.
		ms := r.LatencyMs
		if res.Response != nil && res.RoundTripMs > 0 {
			ms = res.RoundTripMs
		}
		fmt.Fprintf(g.stdout, "delivered to %s (%s, %.2f ms)\n", r.TargetAgentID, r.Path, ms)
	}
	if e := res.Response; e != nil {
		fmt.Fprintf(g.stdout, "%s from %s:\n%s\n", e.Type, e.Sender, indentJSON(e.Payload))
	}
}

func indentJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

func newAgentsCmd(g *globals) *cobra.Command {
	var origin string
	c := &cobra.Command{
		Use:   "agents",
		Short: "List the agents this node hosts and the remote agents it knows",
		Long: `agents lists the Agent Cards known to the running node: its own (local) and
those presented, signed, by connected peers (remote). The ADDRESS column is
what ` + "`nova-node send --to`" + ` accepts; a bare NAME works when it is unique.
NODE says whether the agent's node is this one, connected, or not connected:
a node that left keeps its cards here until their TTL (10 minutes) runs out
(an agent its node stopped hosting leaves at once), and ` + "`send --capability`" + `
prefers agents on connected nodes. With --json, each card's own fields
(tier as a number, 0 to 3) with "address" and "node" added.

A remote agent's TIER is the one this node holds it at: its card's claim
only where a grant of the swarm's authority or this node's trust covers
it, else L3 (least privilege). When it is held lower than it claims, the
column says so: "L3 (claims L0: no grant)". With --json, "basis",
"claimedTier", "claimedSandbox", "expires" and "standingNote" say the same
(see ` + "`nova-node authority`" + `).`,
		Example: `  nova-node agents
  nova-node agents --origin remote
  nova-node agents --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if origin != "" && origin != "local" && origin != "remote" {
				return &exitError{code: 2, err: fmt.Errorf("--origin must be local or remote, not %q", origin)}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			cards, err := cl.Agents(cmd.Context(), origin)
			if err != nil {
				return err
			}
			node := nodeStates(cmd, cl)
			standing := standings(cmd, cl)
			if g.json {
				return g.printJSON(agentViews(cards, node, standing))
			}
			if len(cards) == 0 {
				fmt.Fprintln(g.stdout, "no agents")
				return nil
			}
			fmt.Fprintf(g.stdout, "%-16s %-4s %-7s %-4s %-24s %-14s %s\n", "NAME", "TIER", "ORIGIN", "REV", "CAPABILITIES", "NODE", "ADDRESS")
			anyCut := false
			for _, c := range cards {
				caps, cut := capCell(c.Capabilities)
				anyCut = anyCut || cut
				fmt.Fprintf(g.stdout, "%-16s %-4s %-7s %-4d %-24s %-14s %s\n", c.ID, tierCell(c, standing[c.Address()]), c.Origin, c.Revision, caps, node(c), c.Address())
			}
			if anyCut {
				fmt.Fprintln(g.stdout, capNote)
			}
			return nil
		},
	}
	c.Flags().StringVar(&origin, "origin", "", "only local or only remote agents")
	c.AddCommand(newAgentsFindCmd(g), newAgentsShowCmd(g))
	return c
}

// agentView is a card as `agents --json` prints it: the card's own fields
// (its tier and sandbox those this node holds it at), its address, the
// NODE column of the text output, and for a remote agent its standing: the
// basis (grant, trust, none), the tier and sandbox its card claims, and why
// it is held lower when it is.
type agentView struct {
	agentcard.Card
	Address        string    `json:"address"`
	Node           string    `json:"node,omitempty"` // this, connected, not connected
	Basis          string    `json:"basis,omitempty"`
	ClaimedTier    string    `json:"claimedTier,omitempty"`
	ClaimedSandbox string    `json:"claimedSandbox,omitempty"`
	Expires        time.Time `json:"expires,omitzero"`
	Note           string    `json:"standingNote,omitempty"`
}

func agentViews(cards []agentcard.Card, node func(agentcard.Card) string, standing map[string]localapi.AgentStanding) []agentView {
	views := make([]agentView, len(cards))
	for i, c := range cards {
		v := agentView{Card: c, Address: c.Address(), Node: node(c)}
		if s, ok := standing[v.Address]; ok {
			v.Basis, v.ClaimedTier, v.ClaimedSandbox, v.Expires, v.Note = s.Basis, s.ClaimedTier, s.ClaimedSandbox, s.Expires, s.Note
		}
		views[i] = v
	}
	return views
}

// standings reads the standing of every remote agent, by address; if it
// cannot, there is none to show.
func standings(cmd *cobra.Command, cl *localapi.Client) map[string]localapi.AgentStanding {
	st, err := cl.Authority(cmd.Context())
	if err != nil {
		return nil
	}
	m := make(map[string]localapi.AgentStanding, len(st.Agents))
	for _, a := range st.Agents {
		m[a.Address] = a
	}
	return m
}

// tierCell is the TIER column: the tier this node holds the agent at and,
// when that is lower than its card claims, the claim and why:
// "L3 (claims L0: no grant)".
func tierCell(c agentcard.Card, s localapi.AgentStanding) string {
	if s.Address == "" || (s.ClaimedTier == s.Tier && s.ClaimedSandbox == s.Sandbox) {
		return c.Tier.String()
	}
	why := "no grant"
	if s.Basis != "none" {
		why = "its " + s.Basis + " allows less"
	}
	claim := s.ClaimedTier
	if s.ClaimedSandbox != s.Sandbox {
		claim += " in " + s.ClaimedSandbox
	}
	return fmt.Sprintf("%s (claims %s: %s)", c.Tier, claim, why)
}

// nodeStates tells, for the NODE column, where a card's node stands: this
// node, connected, or not connected (a node that left keeps its cards in
// the registry until their TTL, 10 minutes). It reads the node's peers
// once; if it cannot, the column is left blank.
func nodeStates(cmd *cobra.Command, cl *localapi.Client) func(agentcard.Card) string {
	st, err := cl.Status(cmd.Context())
	if err != nil {
		return func(agentcard.Card) string { return "" }
	}
	connected := make(map[string]bool, len(st.PeerList))
	for _, p := range st.PeerList {
		connected[p.PeerID] = true
	}
	return func(c agentcard.Card) string {
		switch {
		case c.Host == "" || c.Host == st.PeerID:
			return "this"
		case connected[c.Host]:
			return "connected"
		}
		return "not connected"
	}
}

func newAgentsFindCmd(g *globals) *cobra.Command {
	var name, capability, tier, as string
	c := &cobra.Command{
		Use:   "find",
		Short: "Find agents in the swarm by name, capability or tier",
		Long: `find asks the swarm's DHT (for a name or a capability) and the node's registry,
and lists the matching agents. --as applies the sandbox view of one of this
node's agents: a sandboxed agent only sees agents it may discover.`,
		Example: `  nova-node agents find --capability echo
  nova-node agents find --name bob --json
  nova-node agents find --tier L0
  nova-node agents find --capability code.review --as sandboxed-agent`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			given := 0
			for _, v := range []string{name, capability, tier} {
				if v != "" {
					given++
				}
			}
			if given != 1 {
				return usage(cmd, "give exactly one of --name, --capability or --tier")
			}
			if tier != "" {
				if _, err := tiers.ParseTier(tier); err != nil {
					return &exitError{code: 2, err: err, hint: helpHint(cmd)}
				}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			cards, err := cl.FindAgents(cmd.Context(), name, capability, tier, as)
			if err != nil {
				return err
			}
			node := nodeStates(cmd, cl)
			if g.json {
				return g.printJSON(agentViews(cards, node, standings(cmd, cl)))
			}
			if len(cards) == 0 {
				fmt.Fprintln(g.stdout, "no agents")
				return nil
			}
			fmt.Fprintf(g.stdout, "%-16s %-4s %-7s %-24s %-14s %s\n", "NAME", "TIER", "ORIGIN", "CAPABILITIES", "NODE", "ADDRESS")
			anyCut := false
			for _, c := range cards {
				caps, cut := capCell(c.Capabilities)
				anyCut = anyCut || cut
				fmt.Fprintf(g.stdout, "%-16s %-4s %-7s %-24s %-14s %s\n", c.ID, c.Tier, c.Origin, caps, node(c), c.Address())
			}
			if anyCut {
				fmt.Fprintln(g.stdout, capNote)
			}
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "agent name")
	c.Flags().StringVar(&capability, "capability", "", "capability id")
	c.Flags().StringVar(&tier, "tier", "", "tier, L0..L3")
	c.Flags().StringVar(&as, "as", "", "apply the sandbox view of this local agent")
	return c
}

func newAgentsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME|NAME@PEER",
		Short: "Show one agent's card",
		Long: `show prints the signed Agent Card of one agent, local or remote, as JSON:
its address (name@peerID), tier, sandbox, capabilities, version, and the
node that hosts it. A bare name must be unique among the agents the node
knows or finds in the swarm (AMBIGUOUS_AGENT lists the candidates: give
the full address then); AGENT_NOT_FOUND when no node in reach hosts it.`,
		Example: "  nova-node agents show bob\n  nova-node agents show bob@12D3KooW... --json",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usageHint("agents show needs the agent: a name, or name@peerID as `nova-node agents` lists it",
					"for example `nova-node agents show bob`; `nova-node agents` lists the agents this node knows")
			case len(args) > 1:
				return usage(cmd, fmt.Sprintf("agents show takes one agent, got %d: %q (one name or name@peerID)", len(args), args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			name, _, _ := strings.Cut(args[0], "@")
			cards, err := cl.FindAgents(cmd.Context(), name, "", "", "")
			if err != nil {
				return err
			}
			var match []agentcard.Card
			for _, c := range cards {
				if c.Address() == args[0] || !strings.Contains(args[0], "@") {
					match = append(match, c)
				}
			}
			switch {
			case len(match) == 0:
				return &agentcard.NotFoundError{Query: args[0], Where: "the registry and the swarm's DHT"}
			case len(match) > 1:
				var cands []string
				for _, c := range match {
					cands = append(cands, c.Address())
				}
				return &agentcard.AmbiguousError{Name: args[0], Candidates: cands}
			}
			if g.json {
				return g.printJSON(match[0])
			}
			b, _ := json.MarshalIndent(match[0], "", "  ")
			fmt.Fprintln(g.stdout, string(b))
			return nil
		},
	}
}

// capWidth is the width of the CAPABILITIES column of agent tables.
const capWidth = 24

// capCell is cs for a table cell of at most capWidth characters: the ids
// that fit, then "+N" for the others (an MCP agent has one capability per
// tool), and whether some were left out.
func capCell(cs []agentcard.Capability) (cell string, cut bool) {
	full := capIDs(cs)
	if len(full) <= capWidth || len(cs) == 1 {
		return full, false
	}
	for n := len(cs) - 1; n >= 0; n-- {
		more := fmt.Sprintf("+%d", len(cs)-n)
		head := capIDs(cs[:n])
		if n == 0 {
			head = ""
		}
		if len(head)+1+len(more) <= capWidth || n == 0 {
			if head == "" {
				return fmt.Sprintf("%d capabilities", len(cs)), true
			}
			return head + "," + more, true
		}
	}
	return full, false
}

// capNote is the line under an agent table whose capabilities were cut.
const capNote = "(+N: more capabilities; `nova-node agents show NAME` or --json lists them all)"

func capIDs(cs []agentcard.Capability) string {
	if len(cs) == 0 {
		return "-"
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return strings.Join(ids, ",")
}

func newIDCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "id",
		Short: "Print the node's peer ID and the addresses other nodes can dial",
		Long: `id prints the running node's peer ID and full multiaddrs: give one of them to
another node's ` + "`--peer`" + `. When no node is running it prints the peer ID of
the data dir's identity.`,
		Example: `  nova-node id
  nova-node id --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			info, err := cl.ID(cmd.Context())
			if errors.Is(err, localapi.ErrNoNode) {
				cfg, cerr := g.config()
				if cerr != nil {
					return cerr
				}
				k, kerr := node.LoadIdentity(cfg.DataDir)
				if errors.Is(kerr, node.ErrNoIdentity) {
					// Neither a running node nor one to start: NO_NODE, not INTERNAL.
					return &codedError{code: codeNoNode, msg: fmt.Sprintf("no node in %s: no running node and no identity.key (create one with `nova-node init`)", cfg.DataDir)}
				}
				if kerr != nil {
					return kerr
				}
				id, _ := peerID(k)
				info = localapi.IDInfo{PeerID: id, Version: node.Version, Swarm: cfg.Swarm, DataDir: cfg.DataDir, Addrs: []string{}, Agents: []string{}}
				err = nil
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(info)
			}
			fmt.Fprintf(g.stdout, "peer ID  %s\nswarm    %s\ndata dir %s\n", info.PeerID, info.Swarm, info.DataDir)
			if len(info.Addrs) == 0 {
				fmt.Fprintln(g.stdout, "(node not running: no addresses)")
			}
			for _, a := range info.Addrs {
				fmt.Fprintf(g.stdout, "addr     %s\n", a)
			}
			for _, a := range info.Agents {
				fmt.Fprintf(g.stdout, "agent    %s\n", a)
			}
			return nil
		},
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the nova-node version",
		Long: `version prints the version of this nova-node binary and the protocol it
speaks (/nova/a2a/1.0.0): nodes speaking the same protocol talk to each
other. It needs no running node; ` + "`nova-node status`" + ` shows the version of
the running one.`,
		Example: `  nova-node version
  nova-node version --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.json {
				return g.printJSON(map[string]string{"version": node.Version, "protocol": "/nova/a2a/1.0.0"})
			}
			fmt.Fprintf(g.stdout, "nova-node %s (protocol /nova/a2a/1.0.0)\n", node.Version)
			return nil
		},
	}
}
