package sandbox

import "strings"

// Actions and the event kind used in [ViolationError] and [SecurityEvent].
const (
	ActionReach    = "reach"    // send a message to an agent
	ActionDiscover = "discover" // see an agent's card in a lookup
	ActionWrite    = "write"    // change a replicated document

	// EventKindSandboxViolation is SecurityEvent.Kind for a denied reach.
	EventKindSandboxViolation = "sandbox-violation"
)

// Policy is the seed's SandboxRoutingConfig. The zero value enforces nothing.
type Policy struct {
	// Enforced turns sandbox checks on. When false, every reach and every
	// discovery is allowed.
	Enforced bool `json:"enforced" yaml:"enforced"`
	// CrossSandboxAllowList lists agents that may be reached, and seen,
	// across sandbox boundaries: a bare name ("europa") for that agent on
	// any peer, or an address ("europa@<peerID>") for one peer's agent. An
	// agent on the list also sees agents in every sandbox.
	CrossSandboxAllowList []string `json:"crossSandboxAllowList" yaml:"crossSandboxAllowList"`
}

// Agent is one side of a decision.
type Agent struct {
	// ID is the agent's name ("europa") or address ("europa@<peerID>").
	// Pass the address when it is known: an address entry on the allow
	// list matches only an ID carrying that address.
	ID string
	// Sandbox is the sandbox the agent runs in; "" means not sandboxed
	// (the host's default space, which is itself a sandbox for the rules).
	Sandbox string
	// Unvouched marks an agent whose name nobody entitled vouches for (a
	// remote agent no grant or trust covers): its host chose the name, so
	// a bare-name entry on the allow list does not match it; an address
	// entry still does.
	Unvouched bool
}

// Decision is the outcome of a check. Allowed is true and the other fields are
// nil, or Allowed is false and Err is a [*ViolationError]; Event is set only
// for a denied reach, and the caller must emit it.
type Decision struct {
	Allowed bool
	Err     error
	Event   *SecurityEvent
}

// SecurityEvent describes a denied reach for the security log and audit trail
// (requirement 10.2). It is a value: the caller emits it.
type SecurityEvent struct {
	Kind     string // EventKindSandboxViolation
	Code     string // CodeSandboxViolation
	Action   string // ActionReach (a denied discovery is filtering, not an event)
	From, To Agent
	Reason   string // human-readable, names both agents and sandboxes
}

// Allowlisted reports whether a is on the cross-sandbox allow list: an entry
// equals a.ID, or equals the bare name of a.ID (the part before its last
// '@') and a is not [Agent.Unvouched]. Empty entries match nothing.
func (p Policy) Allowlisted(a Agent) bool {
	name := a.ID
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	for _, e := range p.CrossSandboxAllowList {
		if e != "" && (e == a.ID || e == name && !a.Unvouched) {
			return true
		}
	}
	return false
}

// CheckReach decides whether from may send a message to to (property 29):
// allowed when the policy is not enforced, when both are in the same sandbox,
// or when to is on the allow list. A denial carries a [*ViolationError] and a
// [SecurityEvent].
func (p Policy) CheckReach(from, to Agent) Decision {
	if !p.Enforced || from.Sandbox == to.Sandbox || p.Allowlisted(to) {
		return Decision{Allowed: true}
	}
	err := &ViolationError{Action: ActionReach, From: from, To: to}
	return Decision{
		Err: err,
		Event: &SecurityEvent{
			Kind:   EventKindSandboxViolation,
			Code:   CodeSandboxViolation,
			Action: ActionReach,
			From:   from,
			To:     to,
			Reason: err.reason(),
		},
	}
}

// CheckDiscover decides whether viewer may see target's card (property 30):
// allowed when the policy is not enforced, when both are in the same sandbox,
// when viewer is on the allow list (granted cross-sandbox access) or when
// target is (it may be reached from anywhere). A denial carries a
// [*ViolationError] and no event.
func (p Policy) CheckDiscover(viewer, target Agent) Decision {
	if !p.Enforced || viewer.Sandbox == target.Sandbox || p.Allowlisted(viewer) || p.Allowlisted(target) {
		return Decision{Allowed: true}
	}
	return Decision{Err: &ViolationError{Action: ActionDiscover, From: viewer, To: target}}
}

// Filter returns the items whose agents viewer may discover, in their original
// order, as a new slice (items is not modified). agentOf maps an item to its
// agent.
func Filter[T any](p Policy, viewer Agent, items []T, agentOf func(T) Agent) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if p.CheckDiscover(viewer, agentOf(it)).Allowed {
			out = append(out, it)
		}
	}
	return out
}

// DocumentSandbox returns the sandbox a replicated document belongs to: the
// part of its name before the first '.' ("lab" for "lab.plan"), or "" for a
// name without a dot, which is a document shared by the whole swarm.
func DocumentSandbox(doc string) string {
	s, _, ok := strings.Cut(doc, ".")
	if !ok {
		return ""
	}
	return s
}

// CheckWrite decides whether agent a may change replicated document doc:
// allowed when the policy is not enforced, when a is in the document's
// sandbox ("" for a shared document, so a sandboxed agent writes only its
// own sandbox's documents), or when a is on the allow list. A denial
// carries a [*ViolationError] and a [SecurityEvent].
func (p Policy) CheckWrite(a Agent, doc string) Decision {
	docSandbox := DocumentSandbox(doc)
	if !p.Enforced || a.Sandbox == docSandbox || p.Allowlisted(a) {
		return Decision{Allowed: true}
	}
	to := Agent{ID: doc, Sandbox: docSandbox}
	err := &ViolationError{Action: ActionWrite, From: a, To: to}
	return Decision{
		Err: err,
		Event: &SecurityEvent{
			Kind:   EventKindSandboxViolation,
			Code:   CodeSandboxViolation,
			Action: ActionWrite,
			From:   a,
			To:     to,
			Reason: err.reason(),
		},
	}
}
