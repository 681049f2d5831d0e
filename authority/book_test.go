package authority_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/tiers"
)

// fixture is a swarm: this node, the founder, two more admin candidates
// and two hosts of remote agents.
type fixture struct {
	self, founder, a, b, h1, h2 ident
	clock                       *clock
	book                        *authority.Book
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{self: identFrom(t, 100), founder: identFrom(t, 101), a: identFrom(t, 102), b: identFrom(t, 103),
		h1: identFrom(t, 104), h2: identFrom(t, 105), clock: newClock()}
	f.book = authority.NewBook(f.self.id, f.founder.id, f.clock.Now)
	return f
}

func (f *fixture) grant(serial uint64, p peer.ID, max tiers.Tier, sandboxes ...string) authority.Grant {
	return authority.Grant{Authority: f.founder.id, Serial: serial, Peer: p, MaxTier: max, Sandboxes: sandboxes}
}

func TestBook_UpdateLog(t *testing.T) {
	f := newFixture(t)
	b := f.book
	if got := b.Admins(); !slices.Equal(got, []peer.ID{f.founder.id}) {
		t.Fatalf("Admins() = %v, want the founder", got)
	}

	u1 := mustUpdate(t, b, f.founder, []peer.ID{f.a.id}, nil)
	if !b.IsAdmin(f.a.id) {
		t.Fatal("a is not an admin after update 1")
	}
	// The same update again is no change.
	if changed, err := b.AddUpdate(u1); err != nil || changed {
		t.Fatalf("AddUpdate(u1) again = %v, %v; want no change", changed, err)
	}
	// A new admin signs the next update.
	u2 := mustUpdate(t, b, f.a, []peer.ID{f.b.id}, nil)

	// A fork: another update 2, signed by an admin, that does not match.
	head1 := authority.Hash(u1)
	fork, err := authority.SealUpdate(authority.Update{Authority: f.founder.id, Seq: 2, Prev: head1, Add: []peer.ID{f.h1.id}}, f.founder.key)
	if err != nil {
		t.Fatal(err)
	}
	// The update with the lower hash wins: the held update 2 keeps its
	// place, or the fork replaces it (and a is then the only new admin
	// no longer: h1 is, and b is not).
	h2, hf := authority.Hash(u2), authority.Hash(fork)
	changed, err := b.AddUpdate(fork)
	if string(hf[:]) < string(h2[:]) {
		if err != nil || !changed || !b.IsAdmin(f.h1.id) || b.IsAdmin(f.b.id) {
			t.Fatalf("lower-hash fork: %v %v, admins %v", changed, err, b.Admins())
		}
		// Back to the branch the rest of this test builds on: a book
		// that saw only u1 and u2.
		b = authority.NewBook(f.self.id, f.founder.id, f.clock.Now)
		for _, u := range [][]byte{u1, u2} {
			if _, err := b.AddUpdate(u); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		checkInvalid(t, err, "update", "fork")
	}

	// A gap: update 4 while 2 are held.
	gap, err := authority.SealUpdate(authority.Update{Authority: f.founder.id, Seq: 4, Prev: authority.Hash(u2), Add: []peer.ID{f.h1.id}}, f.founder.key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.AddUpdate(gap)
	checkInvalid(t, err, "update", "gap")

	// Update 3 that names the wrong previous update.
	wrongPrev, err := authority.SealUpdate(authority.Update{Authority: f.founder.id, Seq: 3, Prev: authority.Hash(u1), Add: []peer.ID{f.h1.id}}, f.founder.key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.AddUpdate(wrongPrev)
	checkInvalid(t, err, "update", "does not follow")

	// A non-admin's update 3.
	_, err = b.AddUpdate(nextUpdate(t, b, f.h1, []peer.ID{f.h1.id}, nil))
	checkInvalid(t, err, "update", "not an admin")

	// Another swarm's update.
	other := authority.NewBook(f.self.id, f.h2.id, f.clock.Now)
	_, err = b.AddUpdate(nextUpdate(t, other, f.h2, []peer.ID{f.h1.id}, nil))
	checkInvalid(t, err, "update", "not this swarm's")
	_, err = authority.NewBook(f.self.id, "", nil).AddUpdate(u1)
	checkInvalid(t, err, "update", "none configured")

	// Removing the founder is refused when sealing, and a signed update
	// that does so (made without SealUpdate) is refused when opened.
	n, head := b.Head()
	_, err = authority.SealUpdate(authority.Update{Authority: f.founder.id, Seq: n + 1, Prev: head, Remove: []peer.ID{f.founder.id}}, f.a.key)
	checkInvalid(t, err, "update", "founding key")
	raw := sealRaw(t, "/nova/authority-update/1", map[int]any{1: []byte(f.founder.id), 2: n + 1, 3: head[:], 5: [][]byte{[]byte(f.founder.id)}}, f.a)
	_, err = authority.OpenUpdate(raw)
	checkInvalid(t, err, "update", "founding key")
	_, err = b.AddUpdate(raw)
	checkInvalid(t, err, "update", "founding key")

	// An admin removes another, who can no longer sign updates.
	mustUpdate(t, b, f.b, nil, []peer.ID{f.a.id})
	if b.IsAdmin(f.a.id) || !b.IsAdmin(f.b.id) || !b.IsAdmin(f.founder.id) {
		t.Fatalf("Admins() = %v after removing a", b.Admins())
	}
	_, err = b.AddUpdate(nextUpdate(t, b, f.a, []peer.ID{f.a.id}, nil))
	checkInvalid(t, err, "update", "not an admin")

	if n, head := b.Head(); n != 3 || head != authority.Hash(b.Log()[2]) || len(b.Log()) != 3 {
		t.Fatalf("Head() = %d, %x with %d updates held", n, head, len(b.Log()))
	}
	// A book that replays the log reaches the same admins.
	replay := authority.NewBook(f.self.id, f.founder.id, nil)
	for i, u := range b.Log() {
		if _, err := replay.AddUpdate(u); err != nil {
			t.Fatalf("replay update %d: %v", i+1, err)
		}
	}
	if !slices.Equal(replay.Admins(), b.Admins()) {
		t.Fatalf("replayed admins %v, want %v", replay.Admins(), b.Admins())
	}
}

func TestBook_MaxUpdates(t *testing.T) {
	f := newFixture(t)
	for i := range authority.MaxUpdates {
		k := []peer.ID{f.a.id}
		if i%2 == 0 {
			mustUpdate(t, f.book, f.founder, k, nil)
		} else {
			mustUpdate(t, f.book, f.founder, nil, k)
		}
	}
	_, err := f.book.AddUpdate(nextUpdate(t, f.book, f.founder, []peer.ID{f.b.id}, nil))
	checkInvalid(t, err, "update", "limit")
	if n, _ := f.book.Head(); n != authority.MaxUpdates {
		t.Fatalf("Head() = %d, want %d", n, authority.MaxUpdates)
	}
}

func TestBook_GrantsPerPeer(t *testing.T) {
	f := newFixture(t)
	b := f.book
	for i := range authority.MaxGrantsPerPeer {
		g := f.grant(uint64(i+1), f.h1.id, tiers.L2)
		g.Expires = t0.Add(time.Duration(i+2) * time.Hour)
		mustAddGrant(t, b, mustSealGrant(t, g, f.founder))
	}
	// A grant that lasts no longer than the shortest held is refused.
	short := f.grant(100, f.h1.id, tiers.L0)
	short.Expires = t0.Add(time.Hour)
	_, _, err := b.AddGrant(mustSealGrant(t, short, f.founder))
	checkInvalid(t, err, "grant", "last longer")
	same := f.grant(101, f.h1.id, tiers.L0)
	same.Expires = t0.Add(2 * time.Hour)
	_, _, err = b.AddGrant(mustSealGrant(t, same, f.founder))
	checkInvalid(t, err, "grant", "last longer")

	// One that lasts longer displaces the shortest (serial 1).
	long := f.grant(102, f.h1.id, tiers.L1)
	long.Expires = t0.Add(100 * time.Hour)
	if _, changed, err := b.AddGrant(mustSealGrant(t, long, f.founder)); err != nil || !changed {
		t.Fatalf("AddGrant(longer) = %v, %v", changed, err)
	}
	// And one with no expiry displaces the next shortest (serial 2).
	forever := f.grant(103, f.h1.id, tiers.L1)
	if _, changed, err := b.AddGrant(mustSealGrant(t, forever, f.founder)); err != nil || !changed {
		t.Fatalf("AddGrant(no expiry) = %v, %v", changed, err)
	}
	var serials []uint64
	for _, h := range b.Grants(f.h1.id) {
		serials = append(serials, h.Grant.Serial)
	}
	if want := []uint64{3, 4, 5, 6, 7, 8, 102, 103}; !slices.Equal(serials, want) {
		t.Fatalf("held serials %v, want %v", serials, want)
	}
	// Other peers are not affected by h1's bound.
	mustAddGrant(t, b, mustSealGrant(t, f.grant(200, f.h2.id, tiers.L2), f.founder))

	// A held grant again is no change; its serial with other terms is refused.
	if _, changed, err := b.AddGrant(mustSealGrant(t, forever, f.founder)); err != nil || changed {
		t.Fatalf("AddGrant(held) = %v, %v; want no change", changed, err)
	}
	forever.MaxTier = tiers.L0
	_, _, err = b.AddGrant(mustSealGrant(t, forever, f.founder))
	checkInvalid(t, err, "grant", "other terms")
}

func TestBook_MaxGrants(t *testing.T) {
	if testing.Short() {
		t.Skip("signs and verifies MaxGrants grants")
	}
	f := newFixture(t)
	peers := authority.MaxGrants/authority.MaxGrantsPerPeer + 1
	serial := uint64(0)
	for p := range peers {
		host := identFrom(t, uint64(1000+p)).id
		for range authority.MaxGrantsPerPeer {
			serial++
			_, _, err := f.book.AddGrant(mustSealGrant(t, f.grant(serial, host, tiers.L2), f.founder))
			if serial <= authority.MaxGrants {
				if err != nil {
					t.Fatalf("grant %d: %v", serial, err)
				}
				continue
			}
			checkInvalid(t, err, "grant", "limit")
		}
	}
	if n := len(f.book.Grants("")); n != authority.MaxGrants {
		t.Fatalf("%d grants held, want %d", n, authority.MaxGrants)
	}
	// A revocation makes room.
	if _, _, _, err := f.book.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: f.founder.id, Serial: 1}, f.founder)); err != nil {
		t.Fatal(err)
	}
	mustAddGrant(t, f.book, mustSealGrant(t, f.grant(serial+1, f.h1.id, tiers.L2), f.founder))
}

func TestBook_Revocation(t *testing.T) {
	f := newFixture(t)
	b := f.book
	mustUpdate(t, b, f.founder, []peer.ID{f.a.id}, nil)
	g := f.grant(7, f.h1.id, tiers.L0, "lab")
	signed := mustSealGrant(t, g, f.a)
	mustAddGrant(t, b, signed)
	c := card("io", f.h1.id, tiers.L0, "lab")
	if got := b.Effective(c); got.Tier != tiers.L0 || got.SandboxID != "lab" {
		t.Fatalf("granted card held at %s %q", got.Tier, got.SandboxID)
	}

	// A non-admin's revocation, or another swarm's, is refused.
	_, _, _, err := b.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: f.founder.id, Serial: 7}, f.h1))
	checkInvalid(t, err, "revocation", "not an admin")
	_, _, _, err = b.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: f.h2.id, Serial: 7}, f.h2))
	checkInvalid(t, err, "revocation", "not this swarm's")

	rs := mustSealRevocation(t, authority.Revocation{Authority: f.founder.id, Serial: 7, Peer: f.h1.id, Reason: "key leaked", At: t0}, f.founder)
	r, dropped, changed, err := b.AddRevocation(rs)
	if err != nil || !changed {
		t.Fatalf("AddRevocation = %v, %v", changed, err)
	}
	if r.Reason != "key leaked" || dropped.Grant.Serial != 7 || dropped.State != authority.StateRevoked || string(dropped.Signed) != string(signed) {
		t.Fatalf("AddRevocation: %+v dropped %+v", r, dropped)
	}
	if hs := b.Grants(""); len(hs) != 0 {
		t.Fatalf("grants held after revocation: %+v", hs)
	}
	if p := b.Presentable(f.h1.id); len(p) != 0 {
		t.Fatalf("revoked grant presentable: %d", len(p))
	}
	if got := b.Effective(c); got.Tier != tiers.L3 || got.SandboxID != "" || got.Standing().Basis != agentcard.BasisNone {
		t.Fatalf("revoked card held at %s %q on %s", got.Tier, got.SandboxID, got.Standing().Basis)
	}
	// Presenting the grant again is refused; so is the revocation again a no-op.
	_, _, err = b.AddGrant(signed)
	checkInvalid(t, err, "grant", "revoked")
	if _, _, changed, err := b.AddRevocation(rs); err != nil || changed {
		t.Fatalf("AddRevocation again = %v, %v; want no change", changed, err)
	}
	if got := b.Revocations(); len(got) != 1 || string(got[0]) != string(rs) {
		t.Fatalf("Revocations() = %d records", len(got))
	}
	// A revocation of a grant not held is kept and blocks it later.
	r2 := mustSealRevocation(t, authority.Revocation{Authority: f.founder.id, Serial: 8}, f.a)
	if _, dropped, changed, err := b.AddRevocation(r2); err != nil || !changed || dropped.Signed != nil {
		t.Fatalf("AddRevocation(not held) = %+v, %v, %v", dropped, changed, err)
	}
	_, _, err = b.AddGrant(mustSealGrant(t, f.grant(8, f.h2.id, tiers.L1), f.founder))
	checkInvalid(t, err, "grant", "serial 8 was revoked")
}

func TestBook_GrantStates(t *testing.T) {
	f := newFixture(t)
	b := f.book
	mustUpdate(t, b, f.founder, []peer.ID{f.a.id}, nil)
	later := f.grant(1, f.h1.id, tiers.L1)
	later.NotBefore = t0.Add(time.Hour)
	soon := f.grant(2, f.h1.id, tiers.L1)
	soon.Expires = t0.Add(time.Minute)
	byA := f.grant(3, f.h1.id, tiers.L1)
	for _, g := range []authority.Grant{later, soon} {
		mustAddGrant(t, b, mustSealGrant(t, g, f.founder))
	}
	mustAddGrant(t, b, mustSealGrant(t, byA, f.a))
	mustUpdate(t, b, f.founder, nil, []peer.ID{f.a.id})
	states := func() []authority.GrantState {
		var out []authority.GrantState
		for _, h := range b.Grants(f.h1.id) {
			out = append(out, h.State)
		}
		return out
	}
	if got, want := states(), []authority.GrantState{authority.StateNotYet, authority.StateValid, authority.StateNotByAdmin}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	if n := len(b.Presentable(f.h1.id)); n != 2 {
		t.Fatalf("%d grants presentable, want 2 (not yet valid and valid)", n)
	}
	f.clock.Advance(time.Minute)
	if got, want := states(), []authority.GrantState{authority.StateNotYet, authority.StateExpired, authority.StateNotByAdmin}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	st := b.Effective(card("io", f.h1.id, tiers.L1, "")).Standing()
	if st.Basis != agentcard.BasisNone || st.Note == "" {
		t.Fatalf("standing %+v, want none with a note", st)
	}
	f.clock.Advance(time.Hour)
	if got := b.Effective(card("io", f.h1.id, tiers.L0, "")); got.Tier != tiers.L1 || got.Standing().Grant == "" {
		t.Fatalf("held at %s on %+v, want L1 by grant 1", got.Tier, got.Standing())
	}
}

func TestBook_NextChange(t *testing.T) {
	f := newFixture(t)
	b := f.book
	if got := b.NextChange(); !got.IsZero() {
		t.Fatalf("NextChange() of an empty book = %v", got)
	}
	g1 := f.grant(1, f.h1.id, tiers.L1)
	g1.NotBefore, g1.Expires = t0.Add(-time.Hour), t0.Add(3*time.Hour)
	g2 := f.grant(2, f.h2.id, tiers.L1)
	g2.NotBefore = t0.Add(2 * time.Hour)
	mustAddGrant(t, b, mustSealGrant(t, g1, f.founder))
	mustAddGrant(t, b, mustSealGrant(t, g2, f.founder))
	if err := b.SetTrust(authority.Trust{Peer: f.h1.id, MaxTier: tiers.L2, Expires: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance time.Duration
		want    time.Time
	}{
		{0, t0.Add(time.Hour)},
		{time.Hour, t0.Add(2 * time.Hour)}, // at the trust's expiry: the next one
		{30 * time.Minute, t0.Add(2 * time.Hour)},
		{time.Hour, t0.Add(3 * time.Hour)},
		{time.Hour, time.Time{}},
	} {
		f.clock.Advance(step.advance)
		if got := b.NextChange(); !got.Equal(step.want) {
			t.Fatalf("at %v: NextChange() = %v, want %v", f.clock.Now(), got, step.want)
		}
	}
}

func TestBook_SnapshotRestore(t *testing.T) {
	f := newFixture(t)
	b := f.book
	mustUpdate(t, b, f.founder, []peer.ID{f.a.id, f.b.id}, nil)
	mustUpdate(t, b, f.a, nil, []peer.ID{f.b.id})
	g1 := f.grant(1, f.h1.id, tiers.L0, "lab")
	g1.Capabilities = []string{"sum"}
	g1.Expires = t0.Add(time.Hour)
	mustAddGrant(t, b, mustSealGrant(t, g1, f.a))
	mustAddGrant(t, b, mustSealGrant(t, f.grant(2, f.h2.id, tiers.L2), f.founder))
	if _, _, _, err := b.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: f.founder.id, Serial: 2}, f.founder)); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []authority.Trust{
		{Peer: f.h2.id, MaxTier: tiers.L1, Sandboxes: []string{"edge"}, Capabilities: []string{}, Note: "covers no capability"},
		{Peer: f.h2.id, Agent: "titan", MaxTier: tiers.L0, Expires: t0.Add(time.Hour), Added: t0},
	} {
		if err := b.SetTrust(tr); err != nil {
			t.Fatal(err)
		}
	}

	s := b.Snapshot()
	if len(s.Updates) != 2 || len(s.Grants) != 1 || len(s.Revocations) != 1 || len(s.Trusts) != 2 {
		t.Fatalf("Snapshot() holds %d updates, %d grants, %d revocations, %d trusts", len(s.Updates), len(s.Grants), len(s.Revocations), len(s.Trusts))
	}
	// Through JSON, as a node persists it.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back authority.State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	r := authority.NewBook(f.self.id, f.founder.id, f.clock.Now)
	if skipped := r.Restore(back); skipped != 0 {
		t.Fatalf("Restore skipped %d records", skipped)
	}
	if got := r.Snapshot(); !reflect.DeepEqual(got, s) {
		t.Fatalf("restored snapshot differs:\n%+v\n%+v", got, s)
	}
	if !slices.Equal(r.Admins(), b.Admins()) {
		t.Fatalf("restored admins %v, want %v", r.Admins(), b.Admins())
	}
	for _, c := range []agentcard.Card{
		card("io", f.h1.id, tiers.L0, "lab", "sum", "search"),
		card("io", f.h2.id, tiers.L0, "edge", "sum"),
		card("titan", f.h2.id, tiers.L0, "edge", "sum"),
	} {
		want, got := b.Effective(c), r.Effective(c)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: restored book holds it at %+v, want %+v", c.Address(), got.Standing(), want.Standing())
		}
		if c.Host == f.h2.id.String() && c.ID == "io" && got.Covers("sum") {
			t.Fatalf("%s: a trust listing no capabilities covers sum after a restore", c.Address())
		}
	}

	// Another swarm's book skips every signed record and keeps the trusts.
	other := authority.NewBook(f.self.id, f.h1.id, f.clock.Now)
	if skipped := other.Restore(back); skipped != 4 {
		t.Fatalf("Restore into another swarm skipped %d, want 4", skipped)
	}
	if len(other.Trusts()) != 2 {
		t.Fatalf("trusts restored: %d", len(other.Trusts()))
	}
}

func TestBook_Trust(t *testing.T) {
	f := newFixture(t)
	b := authority.NewBook(f.self.id, "", f.clock.Now) // a swarm without an authority
	for _, tc := range []struct {
		tr   authority.Trust
		want string
	}{
		{authority.Trust{MaxTier: tiers.L1}, "no peer"},
		{authority.Trust{Peer: f.h1.id, MaxTier: tiers.Tier(4)}, "max tier"},
		{authority.Trust{Peer: f.h1.id, Agent: "bad agent", MaxTier: tiers.L1}, "agent"},
	} {
		checkInvalid(t, b.SetTrust(tc.tr), "trust", tc.want)
	}
	c := card("io", f.h1.id, tiers.L0, "lab")
	if got := b.Effective(c); got.Tier != tiers.L3 || got.Vouched() {
		t.Fatalf("untrusted card held at %s", got.Tier)
	}
	set := func(tr authority.Trust) {
		t.Helper()
		if err := b.SetTrust(tr); err != nil {
			t.Fatal(err)
		}
	}
	set(authority.Trust{Peer: f.h1.id, MaxTier: tiers.L2})
	set(authority.Trust{Peer: f.h1.id, MaxTier: tiers.L1, Sandboxes: []string{"lab"}}) // replaces it
	set(authority.Trust{Peer: f.h1.id, Agent: "io", MaxTier: tiers.L0})
	set(authority.Trust{Peer: f.h2.id, MaxTier: tiers.L0})
	if n := len(b.Trusts()); n != 3 {
		t.Fatalf("%d trusts, want 3", n)
	}
	if got := b.Effective(c); got.Tier != tiers.L0 || got.SandboxID != "lab" || got.Standing().Basis != agentcard.BasisTrust {
		t.Fatalf("trusted card held at %s %q on %s", got.Tier, got.SandboxID, got.Standing().Basis)
	}
	if got := b.RemoveTrust(f.h1.id, "io"); got != 1 {
		t.Fatalf("RemoveTrust(io) = %d", got)
	}
	if got := b.Effective(c); got.Tier != tiers.L1 {
		t.Fatalf("after removing io's trust: held at %s, want L1", got.Tier)
	}
	if got := b.RemoveTrust(f.h1.id, "nobody"); got != 0 {
		t.Fatalf("RemoveTrust(nobody) = %d", got)
	}
	set(authority.Trust{Peer: f.h1.id, Agent: "europa", MaxTier: tiers.L0})
	if got := b.RemoveTrust(f.h1.id, "*"); got != 2 {
		t.Fatalf("RemoveTrust(*) = %d, want 2", got)
	}
	if got := b.Effective(c); got.Tier != tiers.L3 || got.SandboxID != "" {
		t.Fatalf("after removing every trust: held at %s %q", got.Tier, got.SandboxID)
	}
	if ts := b.Trusts(); len(ts) != 1 || ts[0].Peer != f.h2.id {
		t.Fatalf("Trusts() = %+v", ts)
	}
	// An expired trust covers nothing.
	set(authority.Trust{Peer: f.h1.id, MaxTier: tiers.L0, Expires: t0.Add(time.Second)})
	f.clock.Advance(time.Second)
	if got := b.Effective(c); got.Tier != tiers.L3 {
		t.Fatalf("expired trust: held at %s", got.Tier)
	}
	// A book without an authority refuses every grant.
	_, _, err := b.AddGrant(mustSealGrant(t, f.grant(1, f.h1.id, tiers.L0), f.founder))
	checkInvalid(t, err, "grant", "none configured")
}

func TestBook_MaxTrusts(t *testing.T) {
	f := newFixture(t)
	b := f.book
	for i := range authority.MaxTrusts {
		if err := b.SetTrust(authority.Trust{Peer: peer.ID(f.h1.id + peer.ID(rune(i))), MaxTier: tiers.L2}); err != nil {
			t.Fatalf("trust %d: %v", i, err)
		}
	}
	checkInvalid(t, b.SetTrust(authority.Trust{Peer: f.h2.id, MaxTier: tiers.L2}), "trust", "limit")
	// Replacing a trust held needs no room.
	if err := b.SetTrust(authority.Trust{Peer: f.h1.id + peer.ID(rune(0)), MaxTier: tiers.L1}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidError(t *testing.T) {
	err := &authority.InvalidError{Kind: "grant", Reason: "names no peer"}
	if got, want := err.Error(), "grant refused: names no peer (INVALID_GRANT)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	checkInvalid(t, err, "grant")
	// Malformed input of every kind is an *InvalidError.
	for _, in := range [][]byte{nil, {}, []byte("not an envelope"), make([]byte, authority.MaxRecordSize+1)} {
		_, err := authority.OpenGrant(in)
		checkInvalid(t, err, "grant")
		_, err = authority.OpenRevocation(in)
		checkInvalid(t, err, "revocation")
		_, err = authority.OpenUpdate(in)
		checkInvalid(t, err, "update")
	}
	// A record of one kind does not open as another.
	f := newFixture(t)
	g := mustSealGrant(t, f.grant(1, f.h1.id, tiers.L1), f.founder)
	_, err2 := authority.OpenRevocation(g)
	checkInvalid(t, err2, "revocation")
	_, err2 = authority.OpenUpdate(g)
	checkInvalid(t, err2, "update")
	// Sealing refuses what opening would.
	for _, g := range []authority.Grant{
		{Peer: f.h1.id, Serial: 1},
		{Authority: f.founder.id, Serial: 1},
		{Authority: f.founder.id, Peer: f.h1.id},
		{Authority: f.founder.id, Peer: f.h1.id, Serial: 1, Agent: "no spaces"},
		{Authority: f.founder.id, Peer: f.h1.id, Serial: 1, MaxTier: 9},
		{Authority: f.founder.id, Peer: f.h1.id, Serial: 1, Sandboxes: []string{"a b"}},
		{Authority: f.founder.id, Peer: f.h1.id, Serial: 1, Capabilities: []string{""}},
		{Authority: f.founder.id, Peer: f.h1.id, Serial: 1, NotBefore: t0, Expires: t0},
	} {
		_, err := authority.SealGrant(g, f.founder.key)
		checkInvalid(t, err, "grant")
	}
	if _, err := authority.SealGrant(f.grant(1, f.h1.id, tiers.L1), nil); err == nil {
		t.Fatal("SealGrant with a nil key succeeded")
	}
}
