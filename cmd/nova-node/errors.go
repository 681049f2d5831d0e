package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

// How a failed command reports, in one place (report):
//
//   - Without --json: "error: MESSAGE (CODE)" on stderr (the code once,
//     at the end, whatever it is: USAGE, NO_NODE and INTERNAL too), then
//     "hint: WHAT TO DO" when there is advice for the code.
//   - With --json: one JSON document on stdout, nothing on stderr. It is
//     {"error": {"code", "message", "hint"}} on one line; or, for a command
//     that has a result to show (send's exchange, a rejected proposal, a
//     failed swarm, a tool's error result, an A2A call, the demo's
//     summary), that result, indented as on success, with the same "error"
//     object as its "error" member (replacing a string one).
//
// The exit code is the same either way: 2 for a usage error, 1 otherwise.

// The codes of failures that are the CLI's own, not the seed's.
const (
	codeUsage  = "USAGE"   // the command line is wrong: exit 2
	codeNoNode = "NO_NODE" // no node runs on the data dir
	// config.yaml (or a NOVA_* variable) does not read, parse or validate.
	codeConfigInvalid = "CONFIG_INVALID"
	// another nova-node holds the data dir's store.
	codeDataDirInUse = "DATA_DIR_IN_USE"
	// the node cannot listen where it is told to (a port in use).
	codeListenFailed = "LISTEN_FAILED"
	// identity.key is readable by others, or not a key.
	codeIdentityInvalid = "IDENTITY_INVALID"
)

// configInvalid is err, a problem of config.yaml or the NOVA_* variables
// (not of the command line), as a CONFIG_INVALID failure (exit 1).
func configInvalid(err error) error {
	return &exitError{code: 1, err: &codedError{code: codeConfigInvalid, msg: err.Error()}}
}

// exitError carries an exit code chosen by a command. err nil means the
// command printed everything already (there is nothing to add).
type exitError struct {
	code int
	err  error
	// hint says what to do; empty: the usual advice for the error's code
	// (hintFor).
	hint string
	// result, with --json, is printed with the error as its "error"
	// member; without --json the command printed its human form already.
	result any
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usage is a usage error (exit 2): msg, with a hint to cmd's help.
func usage(cmd *cobra.Command, msg string) error {
	return &exitError{code: 2, err: errors.New(msg), hint: helpHint(cmd)}
}

// usageHint is a usage error (exit 2) with its own hint.
func usageHint(msg, hint string) error {
	return &exitError{code: 2, err: errors.New(msg), hint: hint}
}

func helpHint(cmd *cobra.Command) string {
	return fmt.Sprintf("run `%s --help` for usage", cmd.CommandPath())
}

// codedError is a failure with a code of its own, for outcomes that are
// not Go errors elsewhere: a rejected proposal, a failed swarm, a tool's
// error result.
type codedError struct {
	code, msg string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Code() string  { return e.code }

// errorBody is the "error" member of --json output.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
}

// report prints err, which cmd (the command that ran, or the root) returned,
// and returns the exit code.
func report(g *globals, cmd *cobra.Command, jsonOut bool, err error) int {
	exit, hint := 1, ""
	var result any
	var ee *exitError
	if errors.As(err, &ee) {
		exit, hint, result = ee.code, ee.hint, ee.result
		if ee.err == nil {
			return exit // printed by the command
		}
		err = ee.err
	}
	code := codeOf(err, exit)
	msg := messageOf(err, code)
	if hint == "" && code == protocol.CodeDeliveryFailed && strings.Contains(msg, "has no handler") {
		// Delivered to a running node whose agent takes no requests.
		hint = noHandlerHint
	}
	var h interface{ Hint() string }
	if hint == "" && errors.As(err, &h) {
		hint = h.Hint() // the error's own advice (node's IdentityLostError, ...)
	}
	if hint == "" {
		hint = hintFor(cmd, code)
	}
	if hint == "" {
		hint = localHint(msg, code)
	}
	if !jsonOut {
		msg += " (" + code + ")" // messageOf took a trailing one off

		fmt.Fprintln(g.stderr, "error:", msg)
		if hint != "" {
			fmt.Fprintln(g.stderr, "hint:", hint)
		}
		return exit
	}
	if hint == "" {
		hint = helpHint(cmd)
	}
	body := errorBody{Code: code, Message: msg, Hint: hint}
	if result != nil {
		if b, err := withError(result, body); err == nil {
			var out bytes.Buffer
			_ = json.Indent(&out, b, "", "  ")
			fmt.Fprintf(g.stdout, "%s\n", out.Bytes())
			return exit
		} // not an object: the error alone
	}
	fmt.Fprintf(g.stdout, "%s\n", marshal(map[string]errorBody{"error": body}))
	return exit
}

// trailingCode splits "message (CODE)", where CODE is an error code
// (upper-case letters and underscores).
func trailingCode(msg string) (code, rest string, ok bool) {
	msg = strings.TrimSpace(msg)
	i := strings.LastIndex(msg, " (")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return "", msg, false
	}
	code = msg[i+2 : len(msg)-1]
	if len(code) < 3 || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
		return "", msg, false
	}
	return code, msg[:i], true
}

// marshal is json.Marshal without HTML escaping: messages say "L3 -> L0".
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// codeOf is err's code: NO_NODE, USAGE for any usage error (exit 2), the
// seed's (or a package's) code when err carries one, one of the codes
// of a data dir the user can fix (localCode), else INTERNAL.
func codeOf(err error, exit int) string {
	var ae *localapi.APIError
	var c interface{ Code() string }
	var ce *node.ConfigError
	switch {
	case errors.Is(err, localapi.ErrNoNode):
		return codeNoNode
	case exit == 2:
		// The command line is wrong, whichever package found it (an
		// unknown --type is an envelope's INVALID_ENVELOPE too).
		return codeUsage
	case errors.As(err, &ae) && ae.Code != "":
		return ae.Code
	case errors.As(err, &c) && c.Code() != "":
		return c.Code()
	case errors.As(err, &ce):
		return codeConfigInvalid
	}
	if code := localCode(err); code != "" {
		return code
	}
	return protocol.CodeOf(err)
}

// localCode is the code of a problem the user can fix that reaches the
// CLI without a code of its own, or "". node's errors about the data dir
// and the node's listen addresses are typed and carry their codes and hints
// (DataDirInUseError, ListenError, IdentityInvalidError, ...); what is
// left is a port another listener of the node could not bind (metrics and
// MCP over HTTP, the A2A gateway).
func localCode(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return codeListenFailed
	}
	return ""
}

// localHint is the advice for the codes of localCode and CONFIG_INVALID,
// which may depend on the message (msg), or "".
func localHint(msg, code string) string {
	switch code {
	case codeConfigInvalid:
		if strings.Contains(msg, ": cannot read it: ") {
			return "config.yaml in the data dir must be a file you can read: fix it, or move it away and run `nova-node init` for a fresh commented one"
		}
		return "fix the key or value named above in config.yaml (docs/configuration.md lists the keys), or the NOVA_* variable it names; then run the command again (a running node takes agent changes on SIGHUP)"
	case codeListenFailed:
		// Not the node's libp2p addresses (ListenError has its own hint).
		return "another program holds a port the node needs besides its listen addresses (the metrics and MCP HTTP address, `metricsListen` in config.yaml, or the A2A gateway's, `a2a.listen`): stop it, or choose another port there"
	}
	return ""
}

// messageOf is err's message without the " (CODE)" that API errors end
// with, in the CLI's words (cliWords).
func messageOf(err error, code string) string {
	msg := err.Error()
	var ae *localapi.APIError
	if errors.As(err, &ae) && ae == err {
		msg = ae.Message
	}
	return oneLine(cliWords.Replace(strings.TrimSuffix(strings.TrimSpace(msg), " ("+code+")")))
}

// oneLine puts a message on one line, so that its code ends the line it is
// on: cobra's "Did you mean this?" list becomes "did you mean X?", other
// line breaks "; ".
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	const didYouMean = "Did you mean this?"
	if i := strings.Index(msg, didYouMean); i >= 0 {
		suggestions := strings.Fields(msg[i+len(didYouMean):])
		return strings.TrimSpace(msg[:i]) + ": did you mean " + strings.Join(suggestions, " or ") + "?"
	}
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// cliWords rewords what errors from the packages below say in their
// callers' terms (an envelope field) where the CLI user has a flag instead,
// named by the hint.
var cliWords = strings.NewReplacer(
	"needs metadata.escalationJustification", "carries none",
)

// noHandlerHint answers a DELIVERY_FAILED from an agent that has no
// handler for requests: the peer is fine.
const noHandlerHint = "the other node is up, but that agent answers no requests (it has no echo capability, MCP server, A2A URL or Go handler): send it a notification (--type notification), or ask an agent that answers"

// hintFor is the usual advice for a failure with code in cmd, or "".
func hintFor(cmd *cobra.Command, code string) string {
	switch code {
	case codeUsage:
		return helpHint(cmd)
	case codeNoNode:
		return "start the node with `nova-node run`, or pass the --data-dir it runs on"
	case "AGENT_NOT_FOUND":
		if cmd.Name() == "find" || cmd.Name() == "show" {
			return "no node in reach hosts that name: check its spelling, and that its node runs and is connected (`nova-node peers`)"
		}
		for _, f := range []string{"from", "as"} {
			if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
				// The missing agent may be the sender, which no swarm lookup finds.
				return "--" + f + " takes an agent this node hosts (`nova-node agents --origin local`); " +
					"for the recipient, `nova-node agents` lists the agents this node knows and `nova-node agents find --name NAME` asks the swarm"
			}
		}
		return "`nova-node agents` lists the agents this node knows; `nova-node agents find --name NAME` asks the swarm"
	case "INVALID_REQUEST", authority.CodeInvalidGrant:
		// The node refused a value given on the command line (a grant's, a
		// trust's); the message names it.
		return "fix the value the message names; " + helpHint(cmd) + " (it lists the forms each flag takes)"
	case "AMBIGUOUS_AGENT":
		return "give the full address name@peerID, as `nova-node agents` lists it"
	case "CAPABILITY_NOT_FOUND":
		if cmd.Name() == "find" {
			return "no agent in reach has that capability: check its id (`nova-node agents` lists capabilities), and that the hosting node runs and is connected (`nova-node peers`)"
		}
		return "`nova-node agents find --capability ID` lists the agents that have it"
	case "TIER_VIOLATION":
		return "the receiving node's tier rules do not let the sender's tier start this conversation: send as an agent whose tier may (see `nova-node agents` for tiers)"
	case "SANDBOX_VIOLATION":
		return "agents in different sandboxes reach each other only when the target is on sandbox.crossSandboxAllowList in the receiving node's config"
	case "ESCALATION_REQUIRED":
		if cmd.Flags().Lookup("justification") != nil {
			return `say why with --justification "WHY": an L2/L3 agent proposing a task to an L0/L1 agent must justify the escalation`
		}
		return "an L2/L3 agent proposing a task to an L0/L1 agent must justify the escalation: " +
			"use `nova-node tasks propose` or `nova-node send --type task-proposal` with --justification \"WHY\""
	case "PEER_UNREACHABLE":
		return "is the other node running, and does this one know its address? `nova-node peers` lists the connected ones; " +
			"give an address with `nova-node run --peer ADDR` (its `nova-node id` prints them), and check firewalls and the swarm secret (`nova-node join`)"
	case protocol.CodeChannelNotFound:
		return "`nova-node channels` lists the open channels with their ids"
	case protocol.CodePeerAway:
		return "nothing is lost: the message waits in this node's outbox and goes, in order, as soon as that node is back (`nova-node channels` shows what waits; deliveryTTL in config.yaml says how long)"
	case protocol.CodeQueueFull:
		return "too many messages wait for that agent: send again once some are acknowledged (`nova-node channels` shows the backlog)"
	case "CHANNEL_CLOSED":
		return "its channel was closed (`nova-node channels close`, or the node stopping) before the peer acknowledged it: send again, on a new channel"
	case "DELIVERY_FAILED":
		if f := cmd.Flags().Lookup("capability"); f != nil && f.Changed {
			return "the agent chosen for the capability did not answer: send again, and an agent on a node that answers goes first " +
				"(agents on nodes this one could not reach go last); `nova-node agents find --capability ID` lists the others"
		}
		return "is the other node running and reachable? `nova-node peers` and `nova-node ping AGENT` tell"
	}
	return ""
}

// withError returns result, which must encode as a JSON object, with e as
// its "error" member: in place of an "error" member it has, else last. The
// other members keep their order.
func withError(result any, e errorBody) ([]byte, error) {
	raw, eb := marshal(result), marshal(e)
	if raw == nil {
		return nil, fmt.Errorf("result does not encode as JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("result is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	member := func(k string, v []byte) {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.Write(marshal(k))
		out.WriteByte(':')
		out.Write(v)
	}
	replaced := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if k == "error" {
			v, replaced = eb, true
		}
		member(k, v)
	}
	if !replaced {
		member("error", eb)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// jsonRequested reports whether args ask for --json, for errors found
// before the flags are parsed (an unknown flag before --json).
func jsonRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}
