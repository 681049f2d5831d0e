package localapi

import (
	"context"
	"net/url"
	"time"
)

// CodeNotAdmin is the code of an authority change (a grant, a revocation,
// an admin update) asked of a node whose key is not an admin of its
// swarm's authority, or of a node whose swarm has no authority.
const CodeNotAdmin = "NOT_ADMIN"

// AuthorityStatus is what a node knows of its swarm's authority and what
// it makes of every remote agent (GET /v1/authority).
type AuthorityStatus struct {
	// Authority is the founding admin's peer ID; "" when the swarm has
	// none (then only trusts vouch for remote agents).
	Authority string   `json:"authority"`
	Self      string   `json:"self"`    // this node's peer ID
	IsAdmin   bool     `json:"isAdmin"` // this node's key is an admin now
	Admins    []string `json:"admins"`
	// LogLength is the number of admin updates held (0: the founder is the
	// only admin ever added).
	LogLength uint64          `json:"logLength"`
	Grants    []GrantInfo     `json:"grants"`
	Trusts    []TrustInfo     `json:"trusts"`
	Agents    []AgentStanding `json:"agents"`
}

// GrantInfo is a grant the node holds, with its state now ("valid",
// "not-yet-valid", "expired", "revoked", "issuer-not-admin").
type GrantInfo struct {
	Serial       uint64    `json:"serial"`
	Peer         string    `json:"peer"`
	Agent        string    `json:"agent,omitempty"` // "" for every agent of Peer
	MaxTier      string    `json:"maxTier"`
	Sandboxes    []string  `json:"sandboxes,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"` // absent: all
	NotBefore    time.Time `json:"notBefore,omitzero"`
	Expires      time.Time `json:"expires,omitzero"` // absent: never
	Issuer       string    `json:"issuer"`
	State        string    `json:"state"`
}

// TrustInfo is a trust of this node's operator in a peer.
type TrustInfo struct {
	Peer         string    `json:"peer"`
	Agent        string    `json:"agent,omitempty"`
	MaxTier      string    `json:"maxTier"`
	Sandboxes    []string  `json:"sandboxes,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Expires      time.Time `json:"expires,omitzero"`
	Added        time.Time `json:"added,omitzero"`
	Note         string    `json:"note,omitempty"`
	Expired      bool      `json:"expired,omitempty"`
}

// AgentStanding is what the node makes of one remote agent's claims: the
// tier and sandbox its card claims, those the node holds it at, and why.
type AgentStanding struct {
	Address        string    `json:"address"`
	Peer           string    `json:"peer"`
	ClaimedTier    string    `json:"claimedTier"`
	ClaimedSandbox string    `json:"claimedSandbox,omitempty"`
	Tier           string    `json:"tier"`
	Sandbox        string    `json:"sandbox,omitempty"`
	Basis          string    `json:"basis"` // grant, trust, none (or claim)
	Grant          string    `json:"grant,omitempty"`
	Expires        time.Time `json:"expires,omitzero"`
	Note           string    `json:"note,omitempty"` // why it is held lower than it claims
}

// GrantRequest asks an admin node to sign a grant (POST
// /v1/authority/grants). Zero times: valid from now, never expires.
type GrantRequest struct {
	Peer         string    `json:"peer"`
	Agent        string    `json:"agent,omitempty"`
	MaxTier      string    `json:"maxTier"`
	Sandboxes    []string  `json:"sandboxes,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	NotBefore    time.Time `json:"notBefore,omitzero"`
	Expires      time.Time `json:"expires,omitzero"`
}

// GrantIssued is a grant an admin node signed: its details and the signed
// record (base64url), which config.yaml's grants key takes.
type GrantIssued struct {
	GrantInfo
	Signed string `json:"signed"`
}

// Admission is what an invite with a grant carries for the joiner: a new
// identity (a libp2p-marshalled Ed25519 private key, base64url) and the
// grant the admin node signed for it (Peer is the identity's peer ID).
type Admission struct {
	GrantIssued
	Identity string `json:"identity"`
}

// RevokeRequest asks an admin node to revoke a grant by its serial (POST
// /v1/authority/revocations).
type RevokeRequest struct {
	Serial uint64 `json:"serial"`
	Reason string `json:"reason,omitempty"`
}

// Revoked is a revocation an admin node signed.
type Revoked struct {
	Serial uint64 `json:"serial"`
	Peer   string `json:"peer,omitempty"` // the grant's peer, when the node held it
	Reason string `json:"reason,omitempty"`
}

// AdminsRequest asks an admin node to add or remove admin keys (POST
// /v1/authority/admins).
type AdminsRequest struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// TrustRequest records that this node's operator trusts a peer (POST
// /v1/trust).
type TrustRequest struct {
	Peer         string    `json:"peer"`
	Agent        string    `json:"agent,omitempty"`
	MaxTier      string    `json:"maxTier"`
	Sandboxes    []string  `json:"sandboxes,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Expires      time.Time `json:"expires,omitzero"`
	Note         string    `json:"note,omitempty"`
}

// TrustRemoved says how many trusts DELETE /v1/trust removed.
type TrustRemoved struct {
	Peer    string `json:"peer"`
	Removed int    `json:"removed"`
}

// Authority returns the node's view of its swarm's authority.
func (c *Client) Authority(ctx context.Context) (AuthorityStatus, error) {
	var v AuthorityStatus
	return v, c.do(ctx, "GET", "/v1/authority", nil, &v)
}

// IssueGrant asks the node (an admin) to sign and spread a grant.
func (c *Client) IssueGrant(ctx context.Context, req GrantRequest) (GrantIssued, error) {
	var v GrantIssued
	return v, c.do(ctx, "POST", "/v1/authority/grants", req, &v)
}

// Admit asks the node (an admin) for an admission: a new identity for a
// joiner and a grant for it as req says (req.Peer is ignored).
func (c *Client) Admit(ctx context.Context, req GrantRequest) (Admission, error) {
	var v Admission
	return v, c.do(ctx, "POST", "/v1/authority/admissions", req, &v)
}

// Revoke asks the node (an admin) to sign and spread a revocation.
func (c *Client) Revoke(ctx context.Context, req RevokeRequest) (Revoked, error) {
	var v Revoked
	return v, c.do(ctx, "POST", "/v1/authority/revocations", req, &v)
}

// ChangeAdmins asks the node (an admin) to sign and spread an admin update;
// it returns the status after it.
func (c *Client) ChangeAdmins(ctx context.Context, req AdminsRequest) (AuthorityStatus, error) {
	var v AuthorityStatus
	return v, c.do(ctx, "POST", "/v1/authority/admins", req, &v)
}

// SetTrust records a trust of this node's operator.
func (c *Client) SetTrust(ctx context.Context, req TrustRequest) (TrustInfo, error) {
	var v TrustInfo
	return v, c.do(ctx, "POST", "/v1/trust", req, &v)
}

// RemoveTrust forgets the trust of peer for agent ("" the peer-wide one;
// all: every trust of the peer).
func (c *Client) RemoveTrust(ctx context.Context, peer, agent string, all bool) (TrustRemoved, error) {
	q := url.Values{"peer": {peer}}
	if agent != "" {
		q.Set("agent", agent)
	}
	if all {
		q.Set("all", "1")
	}
	var v TrustRemoved
	return v, c.do(ctx, "DELETE", "/v1/trust?"+q.Encode(), nil, &v)
}
