package authority

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// Bounds of what a [Book] holds. Grants, revocations and updates are signed
// by admins, so only an admin can fill them; the bounds keep even a
// careless admin from growing a node without limit.
const (
	MaxGrantsPerPeer = 8
	MaxGrants        = 4096
	MaxRevocations   = 4096
	MaxUpdates       = 256
	MaxTrusts        = 1024
)

// Trust is this node's operator vouching for a peer directly, as Syncthing
// asks before it shares a folder: the peer's agents keep claims up to
// MaxTier, in Sandboxes, until Expires (zero: until removed). It is local to
// the node (stored in its data dir) and never travels.
type Trust struct {
	Peer      peer.ID    `json:"peer"`
	Agent     string     `json:"agent,omitempty"` // "" for every agent of Peer
	MaxTier   tiers.Tier `json:"maxTier"`
	Sandboxes []string   `json:"sandboxes,omitempty"`
	// Capabilities the agents may advertise as covered: nil covers all,
	// empty covers none (omitzero keeps an empty list through JSON).
	Capabilities []string  `json:"capabilities,omitzero"`
	Expires      time.Time `json:"expires,omitzero"`
	Added        time.Time `json:"added,omitzero"`
	Note         string    `json:"note,omitempty"`
}

// GrantState says whether a held grant counts now.
type GrantState string

// States of a held grant.
const (
	StateValid      GrantState = "valid"
	StateNotYet     GrantState = "not-yet-valid"
	StateExpired    GrantState = "expired"
	StateRevoked    GrantState = "revoked"
	StateNotByAdmin GrantState = "issuer-not-admin"
)

// HeldGrant is a grant a book holds, as signed, with its state now.
type HeldGrant struct {
	Grant  Grant
	Signed []byte
	State  GrantState
}

// Book is what a node knows about its swarm's authority and what it makes
// of remote cards. It is safe for concurrent use. Its methods never call
// out while holding its lock, so it may be called under other locks (the
// registry calls Effective under its own).
type Book struct {
	self peer.ID
	auth peer.ID // "" when the swarm has no authority
	now  func() time.Time

	mu      sync.RWMutex
	admins  map[peer.ID]bool
	log     [][]byte // signed updates, in order
	grants  map[peer.ID]map[uint64]*held
	nGrants int
	revoked map[uint64]revocation
	trusts  map[peer.ID][]Trust
	known   map[[32]byte]string // hashes of records Add accepted, by kind
}

type held struct {
	g      Grant
	signed []byte
}

type revocation struct {
	r      Revocation
	signed []byte
}

// NewBook returns the book of node self in a swarm whose authority is
// auth ("" for a swarm without one: then only trusts vouch for anyone).
// now is the clock (nil: time.Now).
func NewBook(self, auth peer.ID, now func() time.Time) *Book {
	if now == nil {
		now = time.Now
	}
	b := &Book{self: self, auth: auth, now: now, admins: map[peer.ID]bool{},
		grants: map[peer.ID]map[uint64]*held{}, revoked: map[uint64]revocation{}, trusts: map[peer.ID][]Trust{}, known: map[[32]byte]string{}}
	if auth != "" {
		b.admins[auth] = true
	}
	return b
}

// Authority returns the swarm's authority, "" if it has none.
func (b *Book) Authority() peer.ID { return b.auth }

// Admins returns the current admin keys, sorted.
func (b *Book) Admins() []peer.ID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return slices.Sorted(maps.Keys(b.admins))
}

// IsAdmin reports whether p is an admin key now.
func (b *Book) IsAdmin(p peer.ID) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.admins[p]
}

// Log returns the authority's updates as signed, in order.
func (b *Book) Log() [][]byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return slices.Clone(b.log)
}

// Head returns the number of updates held and the hash of the last
// (zero when none): what a new update must name as Seq-1 and Prev.
func (b *Book) Head() (uint64, [32]byte) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.headLocked()
}

func (b *Book) headLocked() (uint64, [32]byte) {
	if len(b.log) == 0 {
		return 0, [32]byte{}
	}
	return uint64(len(b.log)), Hash(b.log[len(b.log)-1])
}

// AddUpdate applies a signed authority update: it must be the next in the
// log (Seq one past the head, Prev its hash) and signed by a current
// admin. An update already held is no change; one that comes after a gap
// is refused; one that forks the held log is settled by forkLocked.
func (b *Book) AddUpdate(signed []byte) (changed bool, err error) {
	u, err := OpenUpdate(signed)
	if err != nil {
		return false, err
	}
	if b.auth == "" || u.Authority != b.auth {
		return false, invalid("update", "is for authority %s, not this swarm's (%s)", short(u.Authority), b.describeAuth())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, head := b.headLocked()
	switch {
	case u.Seq <= n:
		return b.forkLocked(u, signed)
	case u.Seq > n+1:
		return false, invalid("update", "update %d comes after a gap: %d held", u.Seq, n)
	case u.Prev != head:
		return false, invalid("update", "update %d does not follow the held log", u.Seq)
	case !b.admins[u.Issuer]:
		return false, invalid("update", "signed by %s, which is not an admin", short(u.Issuer))
	case len(b.log) >= MaxUpdates:
		return false, invalid("update", "the log holds %d updates, its limit", MaxUpdates)
	}
	for _, p := range u.Add {
		b.admins[p] = true
	}
	for _, p := range u.Remove {
		delete(b.admins, p)
	}
	b.log = append(b.log, slices.Clone(signed))
	return true, nil
}

// forkLocked settles an update u whose sequence number is already held: the
// same update is no change; a different one that follows the same history
// (a fork: two admins signed concurrently) replaces the held update and
// everything after it if its hash is lower, so every node settles on the
// same log whatever order the branches reached it in. The losing branch's
// admin changes are undone and must be signed again on the winning head.
func (b *Book) forkLocked(u Update, signed []byte) (bool, error) {
	held := b.log[u.Seq-1]
	hu, hh := Hash(signed), Hash(held)
	if hu == hh {
		return false, nil
	}
	var prev [32]byte
	if u.Seq > 1 {
		prev = Hash(b.log[u.Seq-2])
	}
	if u.Prev != prev {
		return false, invalid("update", "update %d does not follow the held log", u.Seq)
	}
	if bytes.Compare(hu[:], hh[:]) > 0 {
		return false, invalid("update", "update %d conflicts with the update %d already held (a fork of the authority log; the update with the lower hash wins, and it is the held one)", u.Seq, u.Seq)
	}
	admins := b.replayLocked(int(u.Seq - 1))
	if !admins[u.Issuer] {
		return false, invalid("update", "signed by %s, which is not an admin", short(u.Issuer))
	}
	for _, p := range u.Add {
		admins[p] = true
	}
	for _, p := range u.Remove {
		delete(admins, p)
	}
	b.log = append(b.log[:u.Seq-1:u.Seq-1], slices.Clone(signed))
	b.admins = admins
	return true, nil
}

// replayLocked returns the admin set after the first n held updates.
func (b *Book) replayLocked(n int) map[peer.ID]bool {
	admins := map[peer.ID]bool{b.auth: true}
	for _, signed := range b.log[:n] {
		u, err := OpenUpdate(signed)
		if err != nil {
			continue // held updates were checked on the way in
		}
		for _, p := range u.Add {
			admins[p] = true
		}
		for _, p := range u.Remove {
			delete(admins, p)
		}
	}
	return admins
}

// AddGrant verifies and stores a signed grant: the swarm's authority, a
// current admin's signature, not revoked, and room for it (at most
// [MaxGrantsPerPeer] per peer: a new serial displaces the held grant that
// lasts least, if it lasts longer). A grant already held is no change.
func (b *Book) AddGrant(signed []byte) (Grant, bool, error) {
	g, err := OpenGrant(signed)
	if err != nil {
		return Grant{}, false, err
	}
	if b.auth == "" || g.Authority != b.auth {
		return g, false, invalid("grant", "is from authority %s, not this swarm's (%s)", short(g.Authority), b.describeAuth())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.admins[g.Issuer] {
		return g, false, invalid("grant", "signed by %s, which is not an admin of this swarm", short(g.Issuer))
	}
	if r, ok := b.revoked[g.Serial]; ok {
		return g, false, invalid("grant", "serial %d was revoked by %s", g.Serial, short(r.r.Issuer))
	}
	m := b.grants[g.Peer]
	if old, ok := m[g.Serial]; ok {
		if string(old.signed) == string(signed) {
			return g, false, nil
		}
		return g, false, invalid("grant", "serial %d is already held with other terms", g.Serial)
	}
	if len(m) >= MaxGrantsPerPeer {
		var least *held
		for _, h := range m {
			if least == nil || lastsLess(h.g, least.g) {
				least = h
			}
		}
		if !lastsLess(least.g, g) {
			return g, false, invalid("grant", "%s already holds %d grants that last longer", short(g.Peer), MaxGrantsPerPeer)
		}
		delete(m, least.g.Serial)
		b.nGrants--
	}
	if b.nGrants >= MaxGrants {
		return g, false, invalid("grant", "this node holds %d grants, its limit", MaxGrants)
	}
	if m == nil {
		m = map[uint64]*held{}
		b.grants[g.Peer] = m
	}
	m[g.Serial] = &held{g: g, signed: slices.Clone(signed)}
	b.nGrants++
	return g, true, nil
}

// lastsLess orders grants by how long they last (no expiry is longest).
func lastsLess(a, b Grant) bool {
	switch {
	case a.Expires.IsZero():
		return false
	case b.Expires.IsZero():
		return true
	}
	return a.Expires.Before(b.Expires)
}

// AddRevocation verifies and stores a signed revocation and drops the grant
// it names, which it returns (ok false when none was held). A revocation
// already held is no change.
func (b *Book) AddRevocation(signed []byte) (r Revocation, dropped HeldGrant, changed bool, err error) {
	r, err = OpenRevocation(signed)
	if err != nil {
		return r, dropped, false, err
	}
	if b.auth == "" || r.Authority != b.auth {
		return r, dropped, false, invalid("revocation", "is from authority %s, not this swarm's (%s)", short(r.Authority), b.describeAuth())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.admins[r.Issuer] {
		return r, dropped, false, invalid("revocation", "signed by %s, which is not an admin of this swarm", short(r.Issuer))
	}
	if _, ok := b.revoked[r.Serial]; ok {
		return r, dropped, false, nil
	}
	if len(b.revoked) >= MaxRevocations {
		return r, dropped, false, invalid("revocation", "this node holds %d revocations, its limit", MaxRevocations)
	}
	b.revoked[r.Serial] = revocation{r: r, signed: slices.Clone(signed)}
	for p, m := range b.grants {
		if h, ok := m[r.Serial]; ok {
			dropped = HeldGrant{Grant: h.g, Signed: h.signed, State: StateRevoked}
			delete(m, r.Serial)
			b.nGrants--
			if len(m) == 0 {
				delete(b.grants, p)
			}
		}
	}
	return r, dropped, true, nil
}

// Revocations returns the revocations held, as signed, by serial.
func (b *Book) Revocations() [][]byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([][]byte, 0, len(b.revoked))
	for _, s := range slices.Sorted(maps.Keys(b.revoked)) {
		out = append(out, b.revoked[s].signed)
	}
	return out
}

// Grants returns the grants held for p (all peers when p is ""), with
// their state now, by peer and serial.
func (b *Book) Grants(p peer.ID) []HeldGrant {
	now := b.now()
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []HeldGrant
	for q, m := range b.grants {
		if p != "" && q != p {
			continue
		}
		for _, h := range m {
			out = append(out, HeldGrant{Grant: h.g, Signed: h.signed, State: b.stateLocked(h.g, now)})
		}
	}
	slices.SortFunc(out, func(x, y HeldGrant) int {
		return cmp.Or(strings.Compare(string(x.Grant.Peer), string(y.Grant.Peer)), cmp.Compare(x.Grant.Serial, y.Grant.Serial))
	})
	return out
}

// Presentable returns the signed grants for p that count now or later (not
// expired, revoked or from a former admin): what p presents with its cards.
func (b *Book) Presentable(p peer.ID) [][]byte {
	var out [][]byte
	for _, h := range b.Grants(p) {
		if h.State == StateValid || h.State == StateNotYet {
			out = append(out, h.Signed)
		}
	}
	return out
}

func (b *Book) stateLocked(g Grant, now time.Time) GrantState {
	switch {
	case b.revoked[g.Serial].signed != nil:
		return StateRevoked
	case !b.admins[g.Issuer]:
		return StateNotByAdmin
	case !g.NotBefore.IsZero() && now.Before(g.NotBefore):
		return StateNotYet
	case !g.Expires.IsZero() && !now.Before(g.Expires):
		return StateExpired
	}
	return StateValid
}

// SetTrust records that this node's operator trusts t.Peer (replacing a
// trust of the same peer and agent).
func (b *Book) SetTrust(t Trust) error {
	if t.Peer == "" {
		return invalid("trust", "names no peer")
	}
	if !t.MaxTier.Valid() {
		return invalid("trust", "max tier %d is not L0..L3", t.MaxTier)
	}
	if t.Agent != "" && !agentcard.ValidID(t.Agent) {
		return invalid("trust", "agent %q is not a valid agent id", t.Agent)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.trusts[t.Peer]
	i := slices.IndexFunc(ts, func(o Trust) bool { return o.Agent == t.Agent })
	if i >= 0 {
		ts[i] = t
		return nil
	}
	n := 0
	for _, ts := range b.trusts {
		n += len(ts)
	}
	if n >= MaxTrusts {
		return invalid("trust", "this node holds %d trusts, its limit", MaxTrusts)
	}
	b.trusts[t.Peer] = append(ts, t)
	return nil
}

// RemoveTrust forgets the trusts of p (all of its agents when agent is
// "*", else the one for agent) and reports how many it removed.
func (b *Book) RemoveTrust(p peer.ID, agent string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.trusts[p]
	n := len(ts)
	if agent != "*" {
		ts = slices.DeleteFunc(ts, func(t Trust) bool { return t.Agent == agent })
	} else {
		ts = nil
	}
	if len(ts) == 0 {
		delete(b.trusts, p)
	} else {
		b.trusts[p] = ts
	}
	return n - len(ts)
}

// Trusts returns the trusts held, by peer and agent.
func (b *Book) Trusts() []Trust {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []Trust
	for _, ts := range b.trusts {
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(x, y Trust) int {
		return cmp.Or(strings.Compare(string(x.Peer), string(y.Peer)), strings.Compare(x.Agent, y.Agent))
	})
	return out
}

// NextChange returns the first instant after now at which a held grant or
// trust starts or stops counting, zero if none will: when the node must
// assess its cards again.
func (b *Book) NextChange() time.Time {
	now := b.now()
	b.mu.RLock()
	defer b.mu.RUnlock()
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range b.grants {
		for _, h := range m {
			consider(h.g.NotBefore)
			consider(h.g.Expires)
		}
	}
	for _, ts := range b.trusts {
		for _, t := range ts {
			consider(t.Expires)
		}
	}
	return next
}

// Effective is the one function that says what a remote agent is: its card
// held at the tier and sandbox its claims earn. A card this node hosts is
// returned as is (its own config governs it). A remote card keeps its
// claimed tier only down to the most privileged tier that a valid grant or
// trust covering it allows, and its claimed sandbox only if one of them
// names it; covered by nothing, it is held at L3 with no sandbox (least
// privilege), whatever it claims. A node whose key is an admin's is covered
// as by a grant of L0 in every sandbox: it could sign itself one. The
// result carries its [agentcard.Standing].
func (b *Book) Effective(c agentcard.Card) agentcard.Card {
	if c.Origin == agentcard.OriginLocal || c.Host == "" || c.Host == b.self.String() {
		return c
	}
	host, err := peer.Decode(c.Host)
	if err != nil {
		return agentcard.WithStanding(c, tiers.L3, "", agentcard.Standing{Basis: agentcard.BasisNone, Note: "its host is not a peer ID"})
	}
	claimTier, claimSandbox := c.Claimed()
	now := b.now()
	b.mu.RLock()
	defer b.mu.RUnlock()

	floor, covered := tiers.L3, false
	var sandboxes, caps []string
	allCaps := false
	st := agentcard.Standing{}
	apply := func(max tiers.Tier, sbs, cs []string, exp time.Time) {
		covered = true
		floor = min(floor, max)
		sandboxes = append(sandboxes, sbs...)
		if cs == nil {
			allCaps = true
		}
		caps = append(caps, cs...)
		if !exp.IsZero() && (st.Expires.IsZero() || exp.Before(st.Expires)) {
			st.Expires = exp
		}
	}
	if b.admins[host] {
		// An admin could sign itself any grant: its own node's agents
		// stand on their claims.
		apply(tiers.L0, []string{AnySandbox}, nil, time.Time{})
		st.Basis, st.Grant = agentcard.BasisGrant, "admin "+short(host)
	}
	for _, t := range b.trusts[host] {
		if (t.Agent == "" || t.Agent == c.ID) && (t.Expires.IsZero() || now.Before(t.Expires)) {
			apply(t.MaxTier, t.Sandboxes, t.Capabilities, t.Expires)
			st.Basis = agentcard.BasisTrust
		}
	}
	var why []string
	var named *Grant // the grant Standing names: the most privileged, then the lowest serial
	for _, h := range b.grants[host] {
		if h.g.Agent != "" && h.g.Agent != c.ID {
			continue
		}
		if s := b.stateLocked(h.g, now); s != StateValid {
			why = append(why, fmt.Sprintf("grant %d is %s", h.g.Serial, s))
			continue
		}
		apply(h.g.MaxTier, h.g.Sandboxes, h.g.Capabilities, h.g.Expires)
		st.Basis = agentcard.BasisGrant
		if named == nil || h.g.MaxTier < named.MaxTier || h.g.MaxTier == named.MaxTier && h.g.Serial < named.Serial {
			named = &h.g
		}
	}
	if named != nil {
		st.Grant = fmt.Sprintf("serial %d by %s", named.Serial, short(named.Issuer))
	}
	if !covered {
		st.Basis = agentcard.BasisNone
		if claimTier != tiers.L3 || claimSandbox != "" {
			reason := "no grant or trust covers it"
			if len(why) > 0 {
				slices.Sort(why)
				reason = strings.Join(why, ", ")
			}
			st.Note = fmt.Sprintf("claims %s%s; held at L3 with no sandbox: %s", claimTier, sandboxPhrase(claimSandbox), reason)
		}
		return agentcard.WithStanding(c, tiers.L3, "", st)
	}
	if !allCaps {
		// Non-nil even when empty: bases that list no capabilities cover
		// none, and a nil list would cover all.
		st.Capabilities = append([]string{}, caps...)
		slices.Sort(st.Capabilities)
		st.Capabilities = slices.Compact(st.Capabilities)
	}
	t, sb := max(claimTier, floor), claimSandbox
	if sb != "" && !slices.Contains(sandboxes, sb) && !slices.Contains(sandboxes, AnySandbox) {
		sb = ""
	}
	if t != claimTier || sb != claimSandbox {
		st.Note = fmt.Sprintf("claims %s%s; its %s allows %s%s", claimTier, sandboxPhrase(claimSandbox), st.Basis, floor, sandboxesPhrase(sandboxes))
	}
	return agentcard.WithStanding(c, t, sb, st)
}

func sandboxPhrase(sb string) string {
	if sb == "" {
		return ""
	}
	return " in sandbox " + sb
}

func sandboxesPhrase(sbs []string) string {
	if len(sbs) == 0 {
		return " and no sandbox"
	}
	s := slices.Clone(sbs)
	slices.Sort(s)
	return " in " + strings.Join(slices.Compact(s), ", ")
}

func (b *Book) describeAuth() string {
	if b.auth == "" {
		return "none configured"
	}
	return short(b.auth)
}

// short abbreviates a peer ID for messages.
func short(p peer.ID) string {
	s := p.String()
	if len(s) > 16 {
		return s[:8] + "…" + s[len(s)-6:]
	}
	return s
}

// State is what a book persists: its records as signed and its trusts.
type State struct {
	Updates     [][]byte `json:"updates,omitempty"`
	Grants      [][]byte `json:"grants,omitempty"`
	Revocations [][]byte `json:"revocations,omitempty"`
	Trusts      []Trust  `json:"trusts,omitempty"`
}

// Snapshot returns the book's state for persistence.
func (b *Book) Snapshot() State {
	s := State{Updates: b.Log(), Revocations: b.Revocations(), Trusts: b.Trusts()}
	for _, h := range b.Grants("") {
		s.Grants = append(s.Grants, h.Signed)
	}
	return s
}

// Restore re-verifies and adds a persisted state: updates first, then
// revocations, grants and trusts. Records that no longer verify (another
// authority configured since, say) are skipped and counted.
func (b *Book) Restore(s State) (skipped int) {
	for _, u := range s.Updates {
		if _, err := b.AddUpdate(u); err != nil {
			skipped++
		}
	}
	for _, r := range s.Revocations {
		if _, _, _, err := b.AddRevocation(r); err != nil {
			skipped++
		}
	}
	for _, g := range s.Grants {
		if _, _, err := b.AddGrant(g); err != nil {
			skipped++
		}
	}
	for _, t := range s.Trusts {
		if err := b.SetTrust(t); err != nil {
			skipped++
		}
	}
	return skipped
}
