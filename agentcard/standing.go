package agentcard

import (
	"slices"
	"time"

	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// Basis says on what ground a node holds an agent's tier and sandbox.
type Basis string

// Bases of a [Standing].
const (
	// BasisLocal: the agent runs on this node; its own config says.
	BasisLocal Basis = "local"
	// BasisGrant: a grant signed by the swarm's authority covers the card.
	BasisGrant Basis = "grant"
	// BasisTrust: this node's operator trusts the agent's host.
	BasisTrust Basis = "trust"
	// BasisNone: nothing covers the card: least privilege (L3, no
	// sandbox), whatever it claims.
	BasisNone Basis = "none"
	// BasisClaim: no authority was consulted (a registry without an
	// assessor, as in unit tests): the card's claims stand as signed.
	BasisClaim Basis = "claim"
)

// Standing is what a node makes of a card's claims: the basis on which it
// holds the card's tier and sandbox, and the claims as signed. A card
// returned by a registry with an assessor (see [Registry.SetAssessor])
// carries its effective tier and sandbox in Tier and SandboxID, and its
// Standing says what it claimed and why it was or was not honoured.
type Standing struct {
	Basis Basis
	// ClaimedTier and ClaimedSandbox are the card's claims, as its host
	// signed them.
	ClaimedTier    tiers.Tier
	ClaimedSandbox string
	// Capabilities lists the capability ids the basis covers; nil means
	// all of the card's. Capability routing prefers covered agents.
	Capabilities []string
	// Grant names the grant that covers the card ("serial 42 by 12D3…"),
	// empty for other bases.
	Grant string
	// Expires is when the basis ends (zero: it does not).
	Expires time.Time
	// Note says why the effective tier or sandbox differs from the claim;
	// empty when the claim stands.
	Note string
}

// Standing returns the card's standing. A card no assessor has seen stands
// on its claims: [BasisLocal] when its origin is local, [BasisClaim]
// otherwise.
func (c Card) Standing() Standing {
	if c.standing != nil {
		return *c.standing
	}
	b := BasisClaim
	if c.Origin == OriginLocal {
		b = BasisLocal
	}
	return Standing{Basis: b, ClaimedTier: c.Tier, ClaimedSandbox: c.SandboxID}
}

// Claimed returns the tier and sandbox the card's host signed, which may
// be more than the node holds the card at (Tier and SandboxID).
func (c Card) Claimed() (tiers.Tier, string) {
	if c.standing != nil {
		return c.standing.ClaimedTier, c.standing.ClaimedSandbox
	}
	return c.Tier, c.SandboxID
}

// Vouched reports whether anyone entitled vouches for the card: it is
// local, granted or trusted (or no authority was consulted). An unvouched
// agent's chosen name counts for nothing: a bare name on a cross-sandbox
// allow list does not match it, and capability routing ranks it last.
func (c Card) Vouched() bool {
	return c.standing == nil || c.standing.Basis != BasisNone
}

// Covers reports whether the card's basis covers capability id: the card
// offers it and nothing restricts it, or the grant or trust lists it.
func (c Card) Covers(id string) bool {
	if !c.HasCapability(id) || !c.Vouched() {
		return false
	}
	return c.standing == nil || c.standing.Capabilities == nil || slices.Contains(c.standing.Capabilities, id)
}

// SandboxAgent returns the card as one side of a sandbox decision: its
// address, its effective sandbox, and whether its name is vouched for.
func (c Card) SandboxAgent() sandbox.Agent {
	return sandbox.Agent{ID: c.Address(), Sandbox: c.SandboxID, Unvouched: !c.Vouched()}
}

// WithStanding returns c held at tier t in sandbox sb, on standing s, whose
// claims are set from c. It is how an assessor (the swarm authority's
// effective-identity function) reports its verdict; the registry stores
// the result for lookups and keeps c as signed.
func WithStanding(c Card, t tiers.Tier, sb string, s Standing) Card {
	s.ClaimedTier, s.ClaimedSandbox = c.Claimed()
	c.Tier, c.SandboxID = t, sb
	c.standing = &s
	return c
}

// SandboxAgentAt is [Card.SandboxAgent] with the card's address given (the
// router keeps it and need not build it again per message).
func (c Card) SandboxAgentAt(addr string) sandbox.Agent {
	return sandbox.Agent{ID: addr, Sandbox: c.SandboxID, Unvouched: !c.Vouched()}
}
