package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// MetaCaller is the _meta key that carries the calling agent's address on
// /nova/mcp/1.0.0. The receiving node checks that the calling peer hosts it.
const MetaCaller = "nova/caller"

// CodeUnauthorizedCaller refuses a call whose claimed caller is missing or
// not hosted by the calling peer.
const CodeUnauthorizedCaller = "UNAUTHORIZED_CALLER"

// CodeBackendUnavailable is the error of a call to a tool whose MCP server
// is down (it is being restarted with backoff).
const CodeBackendUnavailable = "BACKEND_UNAVAILABLE"

// CodePeerUnreachable is the error of a call to a remote tool whose node
// cannot be reached.
const CodePeerUnreachable = "PEER_UNREACHABLE"

// JSON-RPC error codes of denials. They lie outside the range the JSON-RPC
// spec reserves (-32768..-32000); the seed code travels in the error's data
// as {"code": ...}.
var rpcCodes = map[string]int64{
	CodeUnauthorizedCaller:           -31001,
	tiers.CodeTierViolation:          -31002,
	tiers.CodeEscalationRequired:     -31003,
	sandbox.CodeSandboxViolation:     -31004,
	agentcard.CodeAgentNotFound:      -31005,
	agentcard.CodeAmbiguousAgent:     -31006,
	CodeToolNotFound:                 -31007,
	CodeResourceNotFound:             -31008,
	CodePromptNotFound:               -31009,
	CodeMissingArgument:              -31010,
	CodeInvalidArguments:             -31011,
	CodeBackendUnavailable:           -31012,
	CodePeerUnreachable:              -31013,
	CodeResourceReadFailed:           -31014,
	agentcard.CodeCapabilityNotFound: -31015,
}

// RPCError turns err into a JSON-RPC error carrying its seed code: the code
// in data.code, the JSON-RPC code from a fixed table (-31000 for a code the
// table does not know), the message "CODE: what happened" (the code once).
func RPCError(err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	code := CodeOf(err)
	n, ok := rpcCodes[code]
	if !ok {
		n = -31000
	}
	data := fmt.Appendf(nil, `{"code":%q}`, code)
	// The code once: this package's errors say "mcpbridge: CODE: ..." already.
	msg := strings.TrimPrefix(err.Error(), "mcpbridge: ")
	msg = strings.TrimPrefix(msg, code+": ")
	return &jsonrpc.Error{Code: n, Message: code + ": " + msg, Data: data}
}

// CodeOf returns the seed code of err (its Code() method), or
// TOOL_EXECUTION_FAILED.
func CodeOf(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) && c.Code() != "" {
		return c.Code()
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && len(je.Data) > 0 {
		var d struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(je.Data, &d) == nil && d.Code != "" {
			return d.Code
		}
	}
	return CodeToolFailed
}

// callerError is a refused caller claim.
type callerError struct {
	Caller string
	Peer   peer.ID
	Reason string
}

func (e *callerError) Error() string {
	return fmt.Sprintf("mcpbridge: caller %q from peer %s refused: %s", e.Caller, e.Peer, e.Reason)
}
func (e *callerError) Code() string { return CodeUnauthorizedCaller }

// Policy is what the receiving node enforces on every call, read and prompt:
// the claimed caller must be hosted by the calling peer, and the tier and
// sandbox rules between caller and target must allow the call.
type Policy struct {
	Cards   *agentcard.Registry
	Tiers   tiers.Rules
	Sandbox sandbox.Policy
	// Security, when set, is told of every refused caller and every tier or
	// sandbox violation.
	Security func(code, detail string, p peer.ID)
}

// Caller returns the card of the agent claimed as caller, which peer p must
// host.
func (pol *Policy) Caller(p peer.ID, claimed string) (agentcard.Card, error) {
	c, err := pol.resolveCaller(p, p.String(), claimed)
	if err != nil {
		return c, pol.refuse(err, p)
	}
	return c.Clone(), nil
}

// resolveCaller is [Policy.Caller] without telling Security of a refusal
// (lists use it, as hiding items from an unknown caller is no violation)
// and without the copy: the card shares its slices with the registry, and
// the caller must not modify their elements (see agentcard's GetShared).
// host is p.String(), which the caller may have at hand.
func (pol *Policy) resolveCaller(p peer.ID, host, claimed string) (agentcard.Card, error) {
	if claimed == "" {
		return agentcard.Card{}, &callerError{Caller: claimed, Peer: p, Reason: "no calling agent in _meta." + MetaCaller}
	}
	c, _, err := pol.Cards.ResolveShared(claimed)
	if err != nil {
		return agentcard.Card{}, &callerError{Caller: claimed, Peer: p, Reason: err.Error()}
	}
	if c.Host != host {
		return agentcard.Card{}, &callerError{Caller: claimed, Peer: p, Reason: "that agent is hosted by " + c.Host}
	}
	return c, nil
}

// Check applies the tier and sandbox rules to a call from caller to the
// agent target (a request).
func (pol *Policy) Check(p peer.ID, caller, target agentcard.Card) error {
	if err := pol.Tiers.Check(tiers.Message{Source: caller.Tier, Target: target.Tier, Type: "request"}); err != nil {
		return pol.refuse(err, p)
	}
	d := pol.Sandbox.CheckReach(caller.SandboxAgent(), target.SandboxAgent())
	if !d.Allowed {
		return pol.refuse(d.Err, p)
	}
	return nil
}

// Visible decides whether viewer sees target's items in a list: the sandbox
// discovery rule must let viewer see target, and the sandbox reach rule
// [Policy.Check] applies must let viewer call it, so a list never shows an
// item a call would refuse with SANDBOX_VIOLATION. Tiers do not hide items:
// a tier denial is the caller's to see on the call. Nothing is reported to
// Security: hiding an item is not a violation.
func (pol *Policy) Visible(viewer, target agentcard.Card) bool {
	v := viewer.SandboxAgent()
	t := target.SandboxAgent()
	return pol.Sandbox.CheckDiscover(v, t).Allowed && pol.Sandbox.CheckReach(v, t).Allowed
}

func (pol *Policy) refuse(err error, p peer.ID) error {
	if pol.Security != nil && !errors.Is(err, tiers.ErrEscalationRequired) {
		pol.Security(CodeOf(err), err.Error(), p)
	}
	return err
}

// metaCaller returns the caller claimed in a request's _meta.
func metaCaller(req mcp.Request) string {
	if req == nil || req.GetParams() == nil {
		return ""
	}
	m := req.GetParams().GetMeta()
	s, _ := m[MetaCaller].(string)
	return s
}
