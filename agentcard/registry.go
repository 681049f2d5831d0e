package agentcard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/wirecodec"
	"github.com/nova-node/nova-node/tiers"
)

// MaxRemoteCardsPerHost bounds the remote cards the registry holds for one
// host (peer): a peer can present many signed cards, in any number of
// hellos or DHT records, and each would otherwise be kept. A new card past
// the bound is refused with a [*TooManyCardsError]; a new revision or a
// refresh of a card already held for that host is always accepted, and
// cards of the host whose TTL has elapsed make room. A node hosting more
// agents than this is seen by other nodes with only the first ones.
const MaxRemoteCardsPerHost = 256

// Registry holds the cards of the agents this node hosts (local) and the
// cards merged from other nodes (remote), indexed by id, capability and
// tier, with at most [MaxRemoteCardsPerHost] remote cards per host. It is
// passive: it starts no goroutine and keeps no timer; remote cards expire
// by comparing their last merge time with the injected clock on every
// call. All methods are safe for concurrent use (one RWMutex).
//
// Every card it returns is a deep copy, which callers may modify freely,
// except those of the *Shared methods ([Registry.GetShared] and others),
// which share their slices with the registry so that the router's
// per-message lookups allocate nothing.
//
// That sharing is safe because a stored card's slices and schemas are never
// written after it is stored (copy-on-write): every write path stores a new
// deep copy in a new entry (put) and only ever drops old ones.
// The one in-place update, the refresh of an equal revision in
// [Registry.MergeRemote], sets LastSeenAt, a plain field that readers copy
// under the lock with the rest of the Card value.
type Registry struct {
	self    peer.ID
	selfStr string
	now     func() time.Time
	ttl     time.Duration

	mu     sync.RWMutex
	cards  map[key]*entry
	byAddr map[string]*entry // "id@<peerID>" -> entry: exact lookups without decoding the peer ID
	byID   map[string]*set
	byCap  map[string]*set
	byTier [tiers.L3 + 1]map[key]*entry
	byHost map[peer.ID]*set // remote entries only, for MaxRemoteCardsPerHost
	// withdrawn: when each host last said (RetainPeer) it no longer
	// hosts an agent, so that its lingering DHT records (MergeRemoteAt
	// with an older heartbeat) do not bring the card back. At most
	// maxWithdrawnPerHost per host, forgotten after one TTL.
	withdrawn map[peer.ID]map[string]time.Time
	locals    map[key]*entry // the local entries, so Local needs no scan of every card
	gen       atomic.Uint64  // bumped by every put and remove (see Lease)
	// assess maps a remote card, as signed, to the card lookups return
	// (SetAssessor); nil returns it as signed.
	assess func(Card) Card
}

// key identifies a card: local cards are keyed by this node's peer ID, so
// one map holds both kinds (a remote card never has host == self).
type key struct {
	host peer.ID
	id   string
}

type entry struct {
	// card is what lookups return: for a remote card, what the assessor
	// made of claim (see SetAssessor); otherwise claim itself. Neither is
	// modified in place but for LastSeenAt; see Registry.
	card  Card
	claim Card // as stored: a remote card as its host signed it

	addr  string    // card.Address(), computed once for GetSharedAddr and sorting
	seen  time.Time // last Register/MergeRemote, for the TTL of remote cards
	local bool
}

// NewRegistry returns an empty registry for the node self. Options:
// [WithClock] (default time.Now) and [WithRemoteTTL] (default
// [DefaultRemoteTTL]). self may be empty in tests; local cards then have no
// host.
func NewRegistry(self peer.ID, opts ...Option) *Registry {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	r := &Registry{
		self:   self,
		now:    o.now,
		ttl:    o.ttl,
		cards:  make(map[key]*entry),
		byAddr: make(map[string]*entry),
		byID:   make(map[string]*set),
		byCap:  make(map[string]*set),
		byHost: make(map[peer.ID]*set),
		locals: make(map[key]*entry),

		withdrawn: make(map[peer.ID]map[string]time.Time),
	}
	if self != "" {
		r.selfStr = self.String()
	}
	for i := range r.byTier {
		r.byTier[i] = make(map[key]*entry)
	}
	return r
}

// SetAssessor makes f the judge of remote cards: every lookup returns
// f(card as signed) for a remote card, so that whoever reads the registry
// sees the tier and sandbox this node grants it (see [WithStanding]), while
// the card as signed is kept for merging and [Registry.Serialize]. f is
// called with the registry's lock held and must not call back into it. It
// applies f to the cards already held, as [Registry.Reassess] does.
func (r *Registry) SetAssessor(f func(Card) Card) {
	r.mu.Lock()
	r.assess = f
	r.mu.Unlock()
	r.Reassess()
}

// Reassess applies the assessor again to every remote card, after what it
// rests on changed (a grant arrived, expired or was revoked). It returns
// the cards whose tier, sandbox or standing changed, as lookups now return
// them, and renews the registry's lease (see [Registry.Lease]) when any did.
func (r *Registry) Reassess() []Card {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []Card
	for k, e := range r.cards {
		if e.local {
			continue
		}
		v := e.claim
		if r.assess != nil {
			v = r.assess(e.claim)
		}
		if sameView(v, e.card) {
			continue
		}
		delete(r.byTier[e.card.Tier], k)
		e.card = v
		r.byTier[e.card.Tier][k] = e
		changed = append(changed, v)
	}
	if len(changed) > 0 {
		r.gen.Add(1)
	}
	return changed
}

// sameView reports whether a and b, two assessments of one card, hold it
// the same way.
func sameView(a, b Card) bool {
	if a.Tier != b.Tier || a.SandboxID != b.SandboxID || (a.standing == nil) != (b.standing == nil) {
		return false
	}
	if a.standing == nil {
		return true
	}
	x, y := a.standing, b.standing
	return x.Basis == y.Basis && x.Grant == y.Grant && x.Expires.Equal(y.Expires) && x.Note == y.Note &&
		slices.Equal(x.Capabilities, y.Capabilities) && (x.Capabilities == nil) == (y.Capabilities == nil)
}

// Self returns the peer ID of the node whose registry this is.
func (r *Registry) Self() peer.ID { return r.self }

// Register stores a card for an agent this node hosts and returns the
// stored copy. The card is stamped Host = this node, Origin = local and
// LastSeenAt = now, then validated; a Host naming another peer is refused.
// If a local card with the same ID exists: when the data differs (ignoring
// Revision, LastSeenAt, Origin and Host) the revision becomes the old
// revision + 1, whatever c.Revision says (property 3); when it is the same
// the old revision is kept, so re-registering at restart is idempotent. A
// new card keeps c.Revision. Errors are [*InvalidCardError].
func (r *Registry) Register(c Card) (Card, error) {
	now := r.now()
	s := c.Clone()
	if s.Host == "" {
		s.Host = r.selfStr
	}
	s.Origin = OriginLocal
	s.LastSeenAt = now.UnixMilli()
	if err := r.checkLocal(&s); err != nil {
		return Card{}, err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{r.self, s.ID}
	if old, ok := r.cards[k]; ok {
		switch {
		case sameData(old.card, s):
			s.Revision = old.card.Revision
		case old.card.Revision == math.MaxUint64:
			return Card{}, invalid("revision", "cannot be incremented past %d", uint64(math.MaxUint64))
		default:
			s.Revision = old.card.Revision + 1
		}
	}
	r.put(k, &entry{card: s, addr: s.Address(), seen: now, local: true})
	return s.Clone(), nil
}

// Restore puts a local card exactly as it was persisted (revision and
// LastSeenAt kept), replacing any local card with the same ID. It is for
// loading the node's own cards at startup. An empty Host is set to this
// node; a Host naming another peer, or an Origin of "remote", is refused.
func (r *Registry) Restore(c Card) error {
	s := c.Clone()
	if s.Host == "" {
		s.Host = r.selfStr
	}
	if s.Origin == OriginRemote {
		return invalid("origin", "a restored local card cannot be remote")
	}
	s.Origin = OriginLocal
	if err := r.checkLocal(&s); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.put(key{r.self, s.ID}, &entry{card: s, addr: s.Address(), seen: r.now(), local: true})
	return nil
}

// checkLocal validates a card about to be stored as local.
func (r *Registry) checkLocal(s *Card) error {
	ps := s.problems()
	if s.Host != r.selfStr {
		ps = append(ps, FieldProblem{Field: "host", Reason: fmt.Sprintf("names %s, not this node (%s)", wirecodec.Quote(s.Host), wirecodec.Quote(r.selfStr))})
	}
	if len(ps) > 0 {
		return &InvalidCardError{Problems: ps}
	}
	return nil
}

// Unregister removes the local card with this ID and reports whether there
// was one.
func (r *Registry) Unregister(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{r.self, id}
	if _, ok := r.cards[k]; !ok {
		return false
	}
	r.remove(k)
	return true
}

// MergeRemote stores a card received from another node, which the caller
// has verified (see [Open]: the signer must be the card's host). The card
// must validate and its Host must be set and must not be this node. It is
// stored with Origin = remote and LastSeenAt = now, every other field as
// received (property 5). Against a visible card of the same address, a
// higher revision replaces it (changed = true), an equal revision only
// refreshes its LastSeenAt and TTL (changed = false, data kept), and a lower
// revision is ignored (changed = false). An expired card counts as absent.
// A card for an agent not yet held, when its host already has
// [MaxRemoteCardsPerHost] cards here, is refused with a [*TooManyCardsError]
// (matching [ErrTooManyCards]); other errors are [*InvalidCardError].
//
// MergeRemote is [Registry.MergeRemoteAt] with seen = now: use it when the
// card comes straight from its host (a card presented on a live stream).
func (r *Registry) MergeRemote(c Card) (changed bool, err error) {
	now := r.now()
	return r.merge(c, now, now, true, false)
}

// MergeRemoteAt is [Registry.MergeRemote] for a card whose host was last
// known to be alive at seen, rather than now: a card read from the DHT, whose
// signed heartbeat may be minutes old while the record itself lingers long
// after its host has left. The card's TTL runs from seen, so a host that
// stops refreshing its records disappears one TTL after its last heartbeat,
// however often others re-read them. seen is bounded by the registry's
// clock: a time in the future counts as now. The stored LastSeenAt is
// seen, in unix milliseconds.
//
// A card whose TTL has already elapsed at seen is stale: it is not stored
// and changed is false (err is nil when the card is otherwise valid). An
// equal revision moves the visible card's seen time forward, never back;
// a higher revision replaces it and keeps the later of the two times, for
// the same host vouched for both.
func (r *Registry) MergeRemoteAt(c Card, seen time.Time) (changed bool, err error) {
	return r.mergeAt(c, seen, false)
}

// MergeRemoteAtShared is [Registry.MergeRemoteAt] without the copy: the
// registry keeps c's slices and schemas, as the *Shared getters hand out
// theirs, so the caller must never write them afterwards. Discovery holds
// every member's card read-only in its cache and hands that card here, so
// that a node holds each member's card once rather than twice.
func (r *Registry) MergeRemoteAtShared(c Card, seen time.Time) (changed bool, err error) {
	return r.mergeAt(c, seen, true)
}

func (r *Registry) mergeAt(c Card, seen time.Time, shared bool) (changed bool, err error) {
	now := r.now()
	if seen.After(now) {
		seen = now
	}
	return r.merge(c, seen, now, false, shared)
}

// maxWithdrawnPerHost bounds the withdrawals a registry remembers per host
// (a host churning agents cannot grow it); past it, a withdrawn card's
// lingering DHT record may bring it back until its TTL, as before
// withdrawals were remembered.
const maxWithdrawnPerHost = 1024

// maxWithdrawnHosts bounds the hosts whose withdrawals are remembered.
const maxWithdrawnHosts = 4096

// merge stores c, seen alive at seen. direct says c comes from its host
// now (MergeRemote): that undoes a withdrawal. A card whose host withdrew
// it after seen (RetainPeer) is not stored. shared stores c's slices as
// they are (MergeRemoteAtShared); otherwise a deep copy of them.
func (r *Registry) merge(c Card, seen, now time.Time, direct, shared bool) (changed bool, err error) {
	// A shallow copy until the card is stored: most merges refresh a card
	// already held at its revision and store nothing.
	s := c
	s.Origin = OriginRemote
	s.LastSeenAt = seen.UnixMilli()
	ps := s.problems()
	switch {
	case s.Host == "":
		ps = append(ps, FieldProblem{Field: "host", Reason: "required for a remote card"})
	case s.Host == r.selfStr:
		ps = append(ps, FieldProblem{Field: "host", Reason: "names this node; a remote card must come from another peer"})
	}
	if len(ps) > 0 {
		return false, &InvalidCardError{Problems: ps}
	}
	host, err := peer.Decode(s.Host) // cannot fail: validated
	if err != nil {
		return false, invalid("host", "%v", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{host, s.ID}
	if w, ok := r.withdrawn[host][s.ID]; ok {
		switch {
		case direct:
			r.unwithdraw(host, s.ID)
		case !seen.After(w):
			return false, nil // withdrawn since that heartbeat
		}
	}
	old, ok := r.cards[k]
	if ok && r.visible(old, now) {
		switch {
		case s.Revision < old.card.Revision:
			return false, nil
		case s.Revision == old.card.Revision:
			if seen.After(old.seen) {
				// In place, under the write lock: LastSeenAt is not shared
				// with the copies GetShared handed out, only slices are.
				old.seen = seen
				old.card.LastSeenAt = s.LastSeenAt
				old.claim.LastSeenAt = s.LastSeenAt
			}
			return false, nil
		}
		if old.seen.After(seen) {
			seen = old.seen
			s.LastSeenAt = seen.UnixMilli()
		}
	}
	e := &entry{card: s, addr: s.Address(), seen: seen}
	if !r.visible(e, now) {
		return false, nil
	}
	if !ok {
		if err := r.roomFor(host, s.ID, now); err != nil {
			return false, err
		}
	}
	if !shared {
		e.card = s.Clone()
	}
	r.put(k, e)
	return true, nil
}

// roomFor returns a [*TooManyCardsError] when host already has
// MaxRemoteCardsPerHost cards, after dropping those of its cards whose TTL
// has elapsed. id is the agent of the new card, for the error. r.mu must be
// held for writing.
func (r *Registry) roomFor(host peer.ID, id string, now time.Time) error {
	if r.byHost[host].len() < MaxRemoteCardsPerHost {
		return nil
	}
	for k, e := range r.byHost[host].all() {
		if !r.visible(e, now) {
			r.remove(k) // deleting from the map being ranged over is allowed
		}
	}
	if r.byHost[host].len() < MaxRemoteCardsPerHost {
		return nil
	}
	return &TooManyCardsError{Host: host.String(), ID: id, Limit: MaxRemoteCardsPerHost}
}

// RemoveRemote removes the remote card at address "id@peer" and reports
// whether a visible card was removed.
func (r *Registry) RemoveRemote(addr string) bool {
	id, host, err := SplitAddress(addr)
	if err != nil || host == "" || host == r.self {
		return false
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{host, id}
	e, ok := r.cards[k]
	if !ok {
		return false
	}
	r.remove(k)
	return r.visible(e, now)
}

// RemovePeer removes every remote card hosted by p and returns how many
// visible cards it removed. It never removes local cards.
func (r *Registry) RemovePeer(p peer.ID) int {
	if p == r.self {
		return 0
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, e := range r.byHost[p].all() {
		if r.visible(e, now) {
			n++
		}
		r.remove(k)
	}
	return n
}

// RetainPeer removes the remote cards hosted by p whose id is not in
// keep, p's complete list of the agents it hosts now (as p itself stated
// it, on a connection authenticated as p), and returns the addresses of
// the visible cards it removed, sorted. An agent its host stopped hosting
// leaves at once rather than one TTL after its last heartbeat. It never
// removes local cards.
func (r *Registry) RetainPeer(p peer.ID, keep []string) []string {
	if p == r.self {
		return nil
	}
	kept := make(map[string]struct{}, len(keep)) // built before the lock: a roster may hold 1,024 names
	for _, id := range keep {
		kept[id] = struct{}{}
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for k, e := range r.byHost[p].all() {
		if _, ok := kept[k.id]; ok {
			continue
		}
		if r.visible(e, now) {
			gone = append(gone, e.addr)
		}
		r.remove(k)
		r.withdraw(p, k.id, now)
	}
	if len(r.withdrawn[p]) > 0 {
		for id := range kept {
			r.unwithdraw(p, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// withdraw remembers that host stopped hosting id at now. r.mu must be
// held for writing.
func (r *Registry) withdraw(host peer.ID, id string, now time.Time) {
	w := r.withdrawn[host]
	if w == nil {
		if len(r.withdrawn) >= maxWithdrawnHosts {
			r.forgetWithdrawals(now)
			if len(r.withdrawn) >= maxWithdrawnHosts {
				return
			}
		}
		w = make(map[string]time.Time)
		r.withdrawn[host] = w
	}
	if len(w) >= maxWithdrawnPerHost {
		for id, at := range w {
			if now.Sub(at) >= r.ttl {
				delete(w, id)
			}
		}
		if len(w) >= maxWithdrawnPerHost {
			return
		}
	}
	w[id] = now
}

// unwithdraw forgets a withdrawal. r.mu must be held for writing.
func (r *Registry) unwithdraw(host peer.ID, id string) {
	if w := r.withdrawn[host]; w != nil {
		delete(w, id)
		if len(w) == 0 {
			delete(r.withdrawn, host)
		}
	}
}

// Expire drops the remote cards whose TTL has elapsed and returns how many
// it dropped. They are already invisible; Expire only frees their memory,
// so the caller may run it whenever convenient.
func (r *Registry) Expire() int {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, e := range r.cards {
		if !r.visible(e, now) {
			r.remove(k)
			n++
		}
	}
	r.forgetWithdrawals(now)
	return n
}

// forgetWithdrawals drops the withdrawals older than one TTL: every
// heartbeat from before them is stale by now. r.mu must be held for
// writing.
func (r *Registry) forgetWithdrawals(now time.Time) {
	for host, w := range r.withdrawn {
		for id, at := range w {
			if now.Sub(at) >= r.ttl {
				delete(w, id)
			}
		}
		if len(w) == 0 {
			delete(r.withdrawn, host)
		}
	}
}

// exact is the fast path of every lookup by address: the visible card at a
// full address "id@peer" of a known card and that address, found without
// base58-decoding the peer. A miss may still be a card under another
// spelling of the peer ID, which the callers' slow paths find.
func (r *Registry) exact(addr string) (Card, string, bool) {
	if strings.IndexByte(addr, '@') < 0 {
		return Card{}, "", false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byAddr[addr]
	if !ok || !r.live(e) {
		return Card{}, "", false
	}
	return e.card, e.addr, true
}

// Get returns the card at an exact address: "id" and "id@self" name a
// local card, "id@other" a visible remote card. Unlike [Registry.Resolve],
// a bare id never matches a remote card.
func (r *Registry) Get(addr string) (Card, bool) {
	c, _, ok := r.GetSharedAddr(addr)
	return c.Clone(), ok
}

// GetShared is [Registry.Get] without the deep copy, for hot paths such as
// the router's per-message lookups. The card's Protocols, Endpoints and
// Capabilities (and the capabilities' schemas) are the registry's own: the
// caller must not modify their elements. Appending is safe (the stored
// slices have no spare capacity, so append copies), and so is assigning a
// new slice or any other field, as the Card itself is a copy. The card
// never changes under the caller: the registry replaces stored cards, it
// never edits them, so a later Register or MergeRemote leaves it as it was.
func (r *Registry) GetShared(addr string) (Card, bool) {
	c, _, ok := r.GetSharedAddr(addr)
	return c, ok
}

// GetSharedAddr is [Registry.GetShared] that also returns the card's
// address, c.Address(), which the registry keeps: the router needs it for
// every message, and Card.Address allocates it anew on every call.
func (r *Registry) GetSharedAddr(addr string) (c Card, address string, ok bool) {
	if c, a, ok := r.exact(addr); ok {
		return c, a, true
	}
	var k key
	if strings.IndexByte(addr, '@') < 0 {
		// A bare id is local. Every stored id is valid, so an invalid one
		// misses without SplitAddress checking it.
		k = key{r.self, addr}
	} else {
		id, host, err := SplitAddress(addr)
		if err != nil {
			return Card{}, "", false
		}
		k = key{host, id}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.cards[k]
	if !ok || !r.live(e) {
		return Card{}, "", false
	}
	return e.card, e.addr, true
}

// Resolve finds the card an address names. "id@peer" is exact (a
// [*NotFoundError] if absent). A bare "id" is the one visible card with
// that ID among local and remote cards; when several nodes host an agent
// with that ID it is an [*AmbiguousError] listing their addresses, even if
// one of them is local. A malformed address is an [*AddressError]. A
// [*NotFoundError]'s Where says what was searched.
func (r *Registry) Resolve(addr string) (Card, error) {
	c, _, err := r.ResolveShared(addr)
	if err != nil {
		return Card{}, err
	}
	return c.Clone(), nil
}

// ResolveShared is [Registry.Resolve] without the deep copy, and with the
// card's address as [Registry.GetSharedAddr] returns it. The card shares
// its slices with the registry: the caller must not modify their elements
// (see [Registry.GetShared]).
func (r *Registry) ResolveShared(addr string) (c Card, address string, err error) {
	if c, a, ok := r.exact(addr); ok {
		return c, a, nil
	}
	id, host, err := SplitAddress(addr)
	if err != nil {
		return Card{}, "", err
	}
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	if host != "" {
		if e, ok := r.cards[key{host, id}]; ok && r.visible(e, now) {
			return e.card, e.addr, nil
		}
		return Card{}, "", &NotFoundError{Query: addr, Where: r.whereHost(host, now)}
	}
	var found *entry
	n := 0
	for _, e := range r.byID[id].all() {
		if r.visible(e, now) {
			found = e
			n++
		}
	}
	switch n {
	case 0:
		return Card{}, "", &NotFoundError{Query: addr, Where: r.where(now)}
	case 1:
		return found.card, found.addr, nil
	}
	cands := make([]string, 0, n)
	for _, e := range r.byID[id].all() {
		if r.visible(e, now) {
			cands = append(cands, e.addr)
		}
	}
	slices.Sort(cands)
	return Card{}, "", &AmbiguousError{Name: id, Candidates: cands}
}

// ByID returns the visible cards whose ID is id (local and remote), sorted
// by address: the candidates of a bare name, without copying the rest of
// the registry.
func (r *Registry) ByID(id string) []Card {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Card
	for _, e := range r.byID[id].all() {
		if r.visible(e, now) {
			out = append(out, e.card.Clone())
		}
	}
	slices.SortFunc(out, func(a, b Card) int { return strings.Compare(a.Address(), b.Address()) })
	return out
}

// FindByCapability returns the visible cards offering capability capID:
// local cards first, then remote ones, each sorted by address.
func (r *Registry) FindByCapability(capID string) []Card {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.collect(r.byCap[capID].all(), r.byCap[capID].len(), now)
}

// FirstByCapabilityShared returns the card [Registry.FindByCapability]
// would return first, and its address, for routing by capability, where the
// first match wins: one pass over the capability's index, without copying
// or sorting the other cards. ok is false when no visible card offers capID.
// The card shares its slices with the registry: the caller must not modify
// their elements (see [Registry.GetShared]).
func (r *Registry) FirstByCapabilityShared(capID string) (c Card, address string, ok bool) {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var first *entry
	for _, e := range r.byCap[capID].all() {
		// Addresses are unique, so the least entry is the same whatever
		// the map's iteration order.
		if r.visible(e, now) && (first == nil || compareEntries(e, first) < 0) {
			first = e
		}
	}
	if first == nil {
		return Card{}, "", false
	}
	return first.card, first.addr, true
}

// ResolveCapability is [Registry.FindByCapability] for callers that need at
// least one card: none is a [*CapabilityNotFoundError] saying what was
// searched.
func (r *Registry) ResolveCapability(capID string) ([]Card, error) {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	cards := r.collect(r.byCap[capID].all(), r.byCap[capID].len(), now)
	if len(cards) == 0 {
		return nil, &CapabilityNotFoundError{Capability: capID, Where: r.where(now)}
	}
	return cards, nil
}

// FindByTier returns the visible cards of tier t, local first, then remote,
// each sorted by address. An invalid tier matches nothing.
func (r *Registry) FindByTier(t tiers.Tier) []Card {
	if !t.Valid() {
		return []Card{}
	}
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.collect(maps.All(r.byTier[t]), len(r.byTier[t]), now)
}

// List returns every visible card, local first, then remote, each sorted by
// address.
func (r *Registry) List() []Card {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.collect(maps.All(r.cards), len(r.cards), now)
}

// Local returns the local cards, sorted by address.
func (r *Registry) Local() []Card {
	return r.filter(true)
}

// FirstLocal returns the visible local card with the smallest id (a
// node's default agent), copying only that card; false when the node
// hosts no visible agent.
func (r *Registry) FirstLocal() (Card, bool) {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var first *entry
	for _, e := range r.locals {
		if r.visible(e, now) && (first == nil || e.card.ID < first.card.ID) {
			first = e
		}
	}
	if first == nil {
		return Card{}, false
	}
	return cards([]*entry{first})[0], true
}

// Remote returns the visible remote cards, sorted by address.
func (r *Registry) Remote() []Card {
	return r.filter(false)
}

func (r *Registry) filter(local bool) []Card {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	all := r.cards
	if local {
		all = r.locals // a broadcast asks on every node for every message
	}
	var es []*entry
	for _, e := range all {
		if e.local == local && r.visible(e, now) {
			es = append(es, e)
		}
	}
	return cards(es)
}

// serialized is the document of Serialize and Deserialize.
type serialized struct {
	Cards []Card `json:"cards"`
}

// Serialize returns the visible cards as JSON, {"cards": [...]}, in the
// order of [Registry.List], remote cards as their hosts signed them (not
// as an assessor holds them). Each card keeps its origin, revision and
// LastSeenAt, so [Deserialize] restores the same registry.
func (r *Registry) Serialize() ([]byte, error) {
	now := r.now()
	r.mu.RLock()
	es := make([]*entry, 0, len(r.cards))
	for _, e := range r.cards {
		if r.visible(e, now) {
			es = append(es, e)
		}
	}
	sortEntries(es)
	cs := make([]Card, len(es))
	for i, e := range es {
		cs[i] = e.claim
	}
	r.mu.RUnlock()
	b, err := json.Marshal(serialized{Cards: cs})
	if err != nil {
		return nil, fmt.Errorf("agentcard: serialize: %w", err)
	}
	return b, nil
}

// Deserialize rebuilds a registry for self from [Registry.Serialize]'s
// output. Local cards (origin "local" or empty) are restored as with
// [Registry.Restore]; remote cards keep their LastSeenAt, which starts
// their TTL, so a card that was already stale is dropped. Every card must
// validate, no address may appear twice, and decoding is strict. Errors
// name the card: "agentcard: deserialize: cards[3]: ...".
func Deserialize(data []byte, self peer.ID, opts ...Option) (*Registry, error) {
	var doc serialized
	null, err := decodeObject(data, "", func(k string, v []byte, field string) error {
		if k != "cards" {
			return errUnknownField
		}
		cs, err := decodeArray(v, field, func(raw []byte, p string) (c Card, err error) {
			return c, c.decode(raw, p)
		})
		doc.Cards = cs
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("agentcard: deserialize: %w", err)
	}
	if null {
		return nil, fmt.Errorf("agentcard: deserialize: %w", invalid("card", "want a JSON object, got null"))
	}
	r := NewRegistry(self, opts...)
	now := r.now()
	seen := make(map[string]bool, len(doc.Cards))
	for i, c := range doc.Cards {
		addr := c.Address()
		if c.Host == "" {
			addr = c.ID + "@" + r.selfStr
		}
		if seen[addr] {
			return nil, fmt.Errorf("agentcard: deserialize: cards[%d]: %w", i, invalid("id", "duplicate card %s", wirecodec.Quote(addr)))
		}
		seen[addr] = true
		if c.Origin == OriginRemote {
			err = r.restoreRemote(c, now)
		} else {
			err = r.Restore(c)
		}
		if err != nil {
			return nil, fmt.Errorf("agentcard: deserialize: cards[%d]: %w", i, err)
		}
	}
	return r, nil
}

// restoreRemote puts a persisted remote card back with its own LastSeenAt,
// unless its TTL has elapsed. Past [MaxRemoteCardsPerHost] cards of one
// host it is a [*TooManyCardsError].
func (r *Registry) restoreRemote(c Card, now time.Time) error {
	s := c.Clone()
	ps := s.problems()
	switch {
	case s.Host == "":
		ps = append(ps, FieldProblem{Field: "host", Reason: "required for a remote card"})
	case s.Host == r.selfStr:
		ps = append(ps, FieldProblem{Field: "host", Reason: "names this node; a remote card must come from another peer"})
	}
	if len(ps) > 0 {
		return &InvalidCardError{Problems: ps}
	}
	host, err := peer.Decode(s.Host)
	if err != nil {
		return invalid("host", "%v", err)
	}
	e := &entry{card: s, addr: s.Address(), seen: time.UnixMilli(s.LastSeenAt)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.visible(e, now) {
		return nil
	}
	k := key{host, s.ID}
	if _, ok := r.cards[k]; !ok {
		if err := r.roomFor(host, s.ID, now); err != nil {
			return err
		}
	}
	r.put(k, e)
	return nil
}

// visible reports whether e can be seen at now: local cards always, remote
// cards until the TTL has elapsed since their last merge.
func (r *Registry) visible(e *entry, now time.Time) bool {
	return e.local || r.ttl <= 0 || now.Sub(e.seen) < r.ttl
}

// live is visible at the clock's current time, reading the clock only for a
// remote card that expires: the lookups of local agents, the commonest on
// the router's path, then skip it.
func (r *Registry) live(e *entry) bool {
	return e.local || r.ttl <= 0 || r.now().Sub(e.seen) < r.ttl
}

// put stores e under k, replacing and unindexing any previous entry.
// r.mu must be held for writing.
func (r *Registry) put(k key, e *entry) {
	clip(&e.card)
	// A card is stored as signed: a standing it carries (a card taken from
	// a lookup and stored again) would make its claims those of the old
	// assessment. Only the assessor gives a stored card a standing.
	e.card.standing = nil
	e.claim = e.card
	if !e.local && r.assess != nil {
		e.card = r.assess(e.claim)
	}
	r.remove(k)
	r.gen.Add(1)
	r.cards[k] = e
	r.byAddr[e.addr] = e
	if e.local {
		r.locals[k] = e
	} else {
		index(r.byHost, k.host, k, e)
	}
	index(r.byID, e.card.ID, k, e)
	for i := range e.card.Capabilities {
		index(r.byCap, e.card.Capabilities[i].ID, k, e)
	}
	r.byTier[e.card.Tier][k] = e
}

// remove deletes the entry under k and its index entries, if any. r.mu must
// be held for writing.
func (r *Registry) remove(k key) {
	e, ok := r.cards[k]
	if !ok {
		return
	}
	r.gen.Add(1)
	delete(r.cards, k)
	delete(r.byAddr, e.addr)
	if e.local {
		delete(r.locals, k)
	} else {
		unindex(r.byHost, k.host, k)
	}
	unindex(r.byID, e.card.ID, k)
	for i := range e.card.Capabilities {
		unindex(r.byCap, e.card.Capabilities[i].ID, k)
	}
	delete(r.byTier[e.card.Tier], k)
}

// clip removes the spare capacity of a card about to be stored, so that a
// caller of GetShared appending to one of its slices gets a new array
// instead of writing past the end of the registry's, which other callers
// share. It never writes into c's arrays, which a card merged with
// MergeRemoteAtShared shares with its caller: a schema with spare capacity
// is clipped in a copy of the capabilities (cards that [Open] returns
// have none).
func clip(c *Card) {
	c.Protocols = slices.Clip(c.Protocols)
	c.Endpoints = slices.Clip(c.Endpoints)
	c.Capabilities = slices.Clip(c.Capabilities)
	copied := false
	for i := range c.Capabilities {
		cp := c.Capabilities[i]
		if cap(cp.InputSchema) == len(cp.InputSchema) && cap(cp.OutputSchema) == len(cp.OutputSchema) {
			continue
		}
		if !copied {
			c.Capabilities = slices.Clone(c.Capabilities)
			copied = true
		}
		cp.InputSchema = slices.Clip(cp.InputSchema)
		cp.OutputSchema = slices.Clip(cp.OutputSchema)
		c.Capabilities[i] = cp
	}
}

// collect returns copies of the visible entries all yields (n of them) in
// query order.
func (r *Registry) collect(all iter.Seq2[key, *entry], n int, now time.Time) []Card {
	es := make([]*entry, 0, n)
	for _, e := range all {
		if r.visible(e, now) {
			es = append(es, e)
		}
	}
	return cards(es)
}

// cards sorts es (local first, then by address) and copies their cards.
// The copies' slices are cut from one array of each kind rather than
// allocated card by card: a query returns up to every card, and those
// allocations were most of its cost. Each slice's capacity is its length,
// so appending to one card's slice copies it instead of writing over the
// next card's.
func cards(es []*entry) []Card {
	sortEntries(es)
	var np, ne, nc, nb int
	for _, e := range es {
		np += len(e.card.Protocols)
		ne += len(e.card.Endpoints)
		nc += len(e.card.Capabilities)
		for i := range e.card.Capabilities {
			nb += len(e.card.Capabilities[i].InputSchema) + len(e.card.Capabilities[i].OutputSchema)
		}
	}
	protos, ends, caps, schemas := make([]string, 0, np), make([]Endpoint, 0, ne), make([]Capability, 0, nc), make(json.RawMessage, 0, nb)
	out := make([]Card, len(es))
	for i, e := range es {
		c := e.card
		c.Protocols = carve(&protos, c.Protocols)
		c.Endpoints = carve(&ends, c.Endpoints)
		c.Capabilities = carve(&caps, c.Capabilities)
		for j := range c.Capabilities {
			cp := &c.Capabilities[j] // in caps, the copy
			cp.InputSchema = carve(&schemas, cp.InputSchema)
			cp.OutputSchema = carve(&schemas, cp.OutputSchema)
		}
		out[i] = c
	}
	return out
}

// carve appends s to the array *a, which has room for it, and returns the
// copy, capped at its length. Like [Card.Clone], nil stays nil and empty
// stays empty.
func carve[S ~[]E, E any](a *S, s S) S {
	if s == nil {
		return nil
	}
	n := len(*a)
	*a = append(*a, s...)
	return (*a)[n:len(*a):len(*a)]
}

func sortEntries(es []*entry) {
	slices.SortFunc(es, compareEntries)
}

// compareEntries is the order of every query: local cards first, then
// remote ones, each by address.
func compareEntries(a, b *entry) int {
	if a.local != b.local {
		if a.local {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.addr, b.addr)
}

// where describes a whole-registry search for error messages.
func (r *Registry) where(now time.Time) string {
	n := 0
	for _, e := range r.cards {
		if !e.local && r.visible(e, now) {
			n++
		}
	}
	return fmt.Sprintf("local registry (%s) and %s", count(len(r.locals), "agent"), count(n, "remote card"))
}

// whereHost describes a search for a card of one host.
func (r *Registry) whereHost(host peer.ID, now time.Time) string {
	if host == r.self {
		return fmt.Sprintf("local registry (%s)", count(len(r.locals), "agent"))
	}
	n := 0
	for _, e := range r.byHost[host].all() {
		if r.visible(e, now) {
			n++
		}
	}
	return fmt.Sprintf("%s from %s", count(n, "remote card"), host)
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
