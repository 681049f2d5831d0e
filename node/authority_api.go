package node

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/tiers"
)

// The user's side of the swarm authority: what an admin node signs
// (grants, revocations, admin updates), what the operator trusts, and what
// the node makes of every remote agent. The CLI and the local API call
// these; node/authority.go keeps the book.

// NotAdminError says an authority change was asked of a node whose key is
// not an admin of its swarm's authority (or whose swarm has none).
type NotAdminError struct {
	Self      peer.ID
	Authority peer.ID // "" when the swarm has no authority
	What      string  // "sign a grant", ...
}

func (e *NotAdminError) Error() string {
	if e.Authority == "" {
		return fmt.Sprintf("cannot %s: this node runs without a swarm authority (its config.yaml named none when it started)", e.What)
	}
	return fmt.Sprintf("cannot %s: this node (%s) is not an admin of the swarm's authority %s: run it on an admin node", e.What, e.Self, e.Authority)
}

// Code is [localapi.CodeNotAdmin].
func (e *NotAdminError) Code() string { return localapi.CodeNotAdmin }

// Hint says what to do about it.
func (e *NotAdminError) Hint() string {
	if e.Authority == "" {
		return "if config.yaml names an authority, restart the node to take it; else found one with `nova-node invite --new-secret` on the node that is to be the admin (then restart it), or vouch for a peer on this node alone with `nova-node trust`"
	}
	return "run the command on an admin node (`nova-node authority` there lists the admins), or ask an admin to make this node one with `nova-node authority add-admin " + e.Self.String() + "`"
}

// badRequest is an [InvalidRequestError] about field, the reason
// formatted as fmt.Sprintf does.
func badRequest(field, format string, a ...any) error {
	return &InvalidRequestError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

func (n *Node) requireAdmin(what string) error {
	b := n.auth.book
	if b.Authority() == "" || !b.IsAdmin(n.id) {
		return &NotAdminError{Self: n.id, Authority: b.Authority(), What: what}
	}
	return nil
}

func parsePeer(field, s string) (peer.ID, error) {
	p, err := peer.Decode(strings.TrimSpace(s))
	if err != nil {
		return "", badRequest(field, "%q is not a peer ID (`nova-node id` on that node prints it): %v", s, err)
	}
	return p, nil
}

func parseTierField(s string) (tiers.Tier, error) {
	t, err := tiers.ParseTier(s)
	if err != nil {
		return 0, badRequest("maxTier", "%q: want L0, L1, L2 or L3", s)
	}
	return t, nil
}

// newSerial is a random non-zero grant serial.
func newSerial() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if s := binary.BigEndian.Uint64(b[:]); s != 0 {
			return s, nil
		}
	}
}

// Admit makes an admission for a joiner: a new Ed25519 identity and a
// grant for its peer ID as req says (req.Peer is ignored), signed by this
// node, which must be an admin ([NotAdminError] otherwise). The identity's
// private key is in the result: it goes into the invite token, which is
// handed to the joiner privately.
func (n *Node) Admit(req localapi.GrantRequest) (localapi.Admission, error) {
	if err := n.requireAdmin("sign a grant"); err != nil {
		return localapi.Admission{}, err
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return localapi.Admission{}, err
	}
	joiner, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return localapi.Admission{}, err
	}
	req.Peer = joiner.String()
	issued, err := n.IssueGrant(req)
	if err != nil {
		return localapi.Admission{}, err
	}
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return localapi.Admission{}, err
	}
	return localapi.Admission{GrantIssued: issued, Identity: base64.RawURLEncoding.EncodeToString(b)}, nil
}

// IssueGrant signs a grant with this node's key, which must be an admin of
// the swarm's authority ([NotAdminError] otherwise), adds it to the book
// and spreads it to the peers.
func (n *Node) IssueGrant(req localapi.GrantRequest) (localapi.GrantIssued, error) {
	if err := n.requireAdmin("sign a grant"); err != nil {
		return localapi.GrantIssued{}, err
	}
	p, err := parsePeer("peer", req.Peer)
	if err != nil {
		return localapi.GrantIssued{}, err
	}
	t, err := parseTierField(req.MaxTier)
	if err != nil {
		return localapi.GrantIssued{}, err
	}
	if req.Agent != "" && !agentcard.ValidID(req.Agent) {
		return localapi.GrantIssued{}, badRequest("agent", "%q is not a valid agent id", req.Agent)
	}
	if !req.Expires.IsZero() && !req.Expires.After(clock.Now()) {
		return localapi.GrantIssued{}, badRequest("expires", "%s is in the past", req.Expires.Format("2006-01-02T15:04:05Z07:00"))
	}
	serial, err := newSerial()
	if err != nil {
		return localapi.GrantIssued{}, err
	}
	g := authority.Grant{Authority: n.auth.book.Authority(), Serial: serial, Peer: p, Agent: req.Agent, MaxTier: t,
		Sandboxes: req.Sandboxes, Capabilities: req.Capabilities, NotBefore: req.NotBefore, Expires: req.Expires}
	signed, err := authority.SealGrant(g, n.key)
	if err != nil {
		return localapi.GrantIssued{}, err
	}
	if _, err := n.AddAuthorityRecord(signed); err != nil {
		return localapi.GrantIssued{}, err
	}
	g.Issuer = n.id
	info := grantInfo(authority.HeldGrant{Grant: g, Signed: signed, State: authority.StateValid})
	for _, h := range n.auth.book.Grants(p) {
		if h.Grant.Serial == serial {
			info = grantInfo(h)
		}
	}
	return localapi.GrantIssued{GrantInfo: info, Signed: base64.RawURLEncoding.EncodeToString(signed)}, nil
}

// Revoke signs a revocation of grant serial with this node's key (an
// admin's), applies it and spreads it. It names the grant's peer when the
// book holds the grant.
func (n *Node) Revoke(serial uint64, reason string) (localapi.Revoked, error) {
	if err := n.requireAdmin("revoke a grant"); err != nil {
		return localapi.Revoked{}, err
	}
	if serial == 0 {
		return localapi.Revoked{}, badRequest("serial", "0 names no grant: `nova-node grant list` shows the serials")
	}
	var p peer.ID
	for _, h := range n.auth.book.Grants("") {
		if h.Grant.Serial == serial {
			p = h.Grant.Peer
		}
	}
	signed, err := authority.SealRevocation(authority.Revocation{Authority: n.auth.book.Authority(), Serial: serial, Peer: p, Reason: reason, At: clock.Now()}, n.key)
	if err != nil {
		return localapi.Revoked{}, err // INVALID_GRANT: a reason too long
	}
	if _, err := n.AddAuthorityRecord(signed); err != nil {
		return localapi.Revoked{}, err
	}
	out := localapi.Revoked{Serial: serial, Reason: reason}
	if p != "" {
		out.Peer = p.String()
	}
	return out, nil
}

// ChangeAdmins signs the next admin update (adding and removing the keys
// req names) with this node's key (an admin's), applies it and spreads it.
// It returns the status after the change.
func (n *Node) ChangeAdmins(req localapi.AdminsRequest) (localapi.AuthorityStatus, error) {
	if err := n.requireAdmin("change the admins"); err != nil {
		return localapi.AuthorityStatus{}, err
	}
	add, err := parsePeers("add", req.Add)
	if err != nil {
		return localapi.AuthorityStatus{}, err
	}
	remove, err := parsePeers("remove", req.Remove)
	if err != nil {
		return localapi.AuthorityStatus{}, err
	}
	if len(add)+len(remove) == 0 {
		return localapi.AuthorityStatus{}, badRequest("add", "name a key to add or to remove")
	}
	b := n.auth.book
	if slices.Contains(remove, b.Authority()) {
		return localapi.AuthorityStatus{}, badRequest("remove", "the founding key %s is an admin for good: it cannot be removed", b.Authority())
	}
	seq, prev := b.Head()
	signed, err := authority.SealUpdate(authority.Update{Authority: b.Authority(), Seq: seq + 1, Prev: prev, Add: add, Remove: remove}, n.key)
	if err != nil {
		return localapi.AuthorityStatus{}, err // INVALID_GRANT: a key named twice
	}
	if _, err := n.AddAuthorityRecord(signed); err != nil {
		return localapi.AuthorityStatus{}, err
	}
	return n.AuthorityStatus(), nil
}

func parsePeers(field string, ss []string) ([]peer.ID, error) {
	var out []peer.ID
	for _, s := range ss {
		p, err := parsePeer(field, s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// SetTrust records that this node's operator trusts req.Peer, then saves
// the book and reassesses the cards. Trusts are this node's alone: they
// never travel. Setting a trust for the same peer and agent replaces it.
func (n *Node) SetTrust(req localapi.TrustRequest) (localapi.TrustInfo, error) {
	p, err := parsePeer("peer", req.Peer)
	if err != nil {
		return localapi.TrustInfo{}, err
	}
	t, err := parseTierField(req.MaxTier)
	if err != nil {
		return localapi.TrustInfo{}, err
	}
	now := clock.Now()
	tr := authority.Trust{Peer: p, Agent: req.Agent, MaxTier: t, Sandboxes: req.Sandboxes, Capabilities: req.Capabilities,
		Expires: req.Expires, Added: now, Note: req.Note}
	if err := n.auth.book.SetTrust(tr); err != nil {
		return localapi.TrustInfo{}, err
	}
	n.auth.changed(false)
	return trustInfo(tr, now), nil
}

// RemoveTrust forgets the trust of peer for agent ("" the peer-wide one;
// all: every trust of the peer) and reports how many it removed.
func (n *Node) RemoveTrust(peerID, agent string, all bool) (localapi.TrustRemoved, error) {
	p, err := parsePeer("peer", peerID)
	if err != nil {
		return localapi.TrustRemoved{}, err
	}
	if all {
		agent = "*" // the book's "every trust of p"
	}
	k := n.auth.book.RemoveTrust(p, agent)
	if k > 0 {
		n.auth.changed(false)
	}
	return localapi.TrustRemoved{Peer: p.String(), Removed: k}, nil
}

// AuthorityStatus gathers what the node knows of its swarm's authority and
// the standing of every remote agent.
func (n *Node) AuthorityStatus() localapi.AuthorityStatus {
	b := n.auth.book
	seq, _ := b.Head()
	st := localapi.AuthorityStatus{Self: n.id.String(), IsAdmin: b.Authority() != "" && b.IsAdmin(n.id), LogLength: seq,
		Admins: []string{}, Grants: []localapi.GrantInfo{}, Trusts: []localapi.TrustInfo{}, Agents: []localapi.AgentStanding{}}
	if b.Authority() != "" {
		st.Authority = b.Authority().String()
	}
	for _, a := range b.Admins() {
		st.Admins = append(st.Admins, a.String())
	}
	for _, h := range b.Grants("") {
		st.Grants = append(st.Grants, grantInfo(h))
	}
	now := clock.Now()
	for _, t := range b.Trusts() {
		st.Trusts = append(st.Trusts, trustInfo(t, now))
	}
	for _, c := range n.reg.Remote() {
		st.Agents = append(st.Agents, agentStanding(c))
	}
	slices.SortFunc(st.Agents, func(x, y localapi.AgentStanding) int { return strings.Compare(x.Address, y.Address) })
	return st
}

func agentStanding(c agentcard.Card) localapi.AgentStanding {
	s := c.Standing()
	return localapi.AgentStanding{Address: c.Address(), Peer: c.Host, ClaimedTier: s.ClaimedTier.String(), ClaimedSandbox: s.ClaimedSandbox,
		Tier: c.Tier.String(), Sandbox: c.SandboxID, Basis: string(s.Basis), Grant: s.Grant, Expires: s.Expires, Note: s.Note}
}

func grantInfo(h authority.HeldGrant) localapi.GrantInfo {
	g := h.Grant
	return localapi.GrantInfo{Serial: g.Serial, Peer: g.Peer.String(), Agent: g.Agent, MaxTier: g.MaxTier.String(), Sandboxes: g.Sandboxes,
		Capabilities: g.Capabilities, NotBefore: g.NotBefore, Expires: g.Expires, Issuer: g.Issuer.String(), State: string(h.State)}
}

func trustInfo(t authority.Trust, now time.Time) localapi.TrustInfo {
	return localapi.TrustInfo{Peer: t.Peer.String(), Agent: t.Agent, MaxTier: t.MaxTier.String(), Sandboxes: t.Sandboxes,
		Capabilities: t.Capabilities, Expires: t.Expires, Added: t.Added, Note: t.Note, Expired: !t.Expires.IsZero() && !now.Before(t.Expires)}
}
