// Package sandbox holds nova-node's sandbox policy: whether one agent may
// reach (send a message to) another, and whether one agent may discover
// (see the card of) another, given the sandboxes the agents run in.
//
// The package is pure. It imports only the standard library (never another
// nova-node package, never libp2p), starts no goroutines, does no I/O and
// emits nothing. A decision is a [Decision] value; a denied reach carries a
// [SecurityEvent] value that the caller emits, as raft's Ready carries the
// messages its caller sends.
//
// # Rules
//
// [Policy] is the seed's SandboxRoutingConfig. When Enforced is false every
// reach and every discovery is allowed. When it is true:
//
//   - Reach (property 29, requirements 10.1 and 10.2): from may reach to iff
//     both are in the same sandbox, or to is on the cross-sandbox allow list
//     ([Policy.Allowlisted]). A denied reach is a SANDBOX_VIOLATION: the
//     [Decision] has Allowed false, Err a [*ViolationError] with Action
//     "reach", and Event a [SecurityEvent] naming both agents.
//   - Discover (property 30, requirement 10.4): viewer may discover target
//     iff both are in the same sandbox, or viewer is on the allow list (an
//     explicit cross-sandbox grant: it sees every agent), or target is on
//     the allow list (what any agent may reach, any agent may see). A denied
//     discovery is ordinary filtering, not an attack: Err is a
//     [*ViolationError] with Action "discover" and Event is nil. [Filter]
//     applies CheckDiscover to a list of results.
//
// An allow-list entry is an agent id: a bare name ("europa") allows that
// agent on every peer, an address ("europa@12D3KooW...") allows it on that
// peer only. Entries are compared exactly (case-sensitive); empty entries
// match nothing.
//
// # The empty sandbox
//
// An agent whose Sandbox is "" is not sandboxed: it lives in the host's
// default space. That space is itself a sandbox for these rules, so with
// enforcement on, a sandboxed agent cannot reach or see unsandboxed agents
// and unsandboxed agents cannot reach or see sandboxed ones, unless the allow
// list says otherwise. The seed only speaks of messages *from* sandboxed
// agents; treating "" as a sandbox keeps the rule symmetric, so that a
// sandbox is isolated in both directions and an unsandboxed agent cannot
// reach into a sandbox that did not put it on the list. Unsandboxed agents
// reach each other freely ("" == "").
//
// # What the caller must do
//
//  1. Take each agent's Sandbox from its verified agent card (the card's
//     sandboxId, tagged at registration, requirement 10.3), never from the
//     sandboxId a sender claims in an envelope. The receiving node re-checks
//     on receive; it does not trust the sending node to have done so.
//  2. Call [Policy.CheckReach] for every delivery, including each recipient
//     of a broadcast. On a denial, reject the message with Decision.Err
//     (its Code method gives SANDBOX_VIOLATION for the wire) and emit
//     Decision.Event to the security log, metrics and audit trail.
//  3. Filter every discovery result shown to an agent (lookups by id,
//     capability or tier, and listings) with [Filter] or
//     [Policy.CheckDiscover]. A lookup of one agent that is filtered out
//     should look like "not found" to the viewer.
package sandbox
