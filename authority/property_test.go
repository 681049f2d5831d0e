package authority_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/tiers"
)

// Properties of the authority: whatever the admin log, grants, revocations,
// trusts and clock, Effective holds a remote card at no more than what a
// basis that counts allows, and at exactly what the bases that count allow.

var (
	agentNames   = []string{"io", "europa", "titan"}
	sandboxNames = []string{"lab", "prod", "edge"}
	capNames     = []string{"sum", "search"}
)

// drawTier draws L0..L3.
func drawTier(t *rapid.T, label string) tiers.Tier {
	return tiers.Tier(rapid.IntRange(int(tiers.L0), int(tiers.L3)).Draw(t, label))
}

// drawSubset draws a subset of from, nil or empty as rapid likes.
func drawSubset(t *rapid.T, from []string, label string) []string {
	if rapid.Bool().Draw(t, label+".nil") {
		return nil
	}
	var out []string
	for _, s := range from {
		if rapid.Bool().Draw(t, label+"."+s) {
			out = append(out, s)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// drawWindow draws a grant's NotBefore and Expires around now (zero for
// none), Expires after NotBefore, in whole seconds.
func drawWindow(t *rapid.T, now time.Time, label string) (notBefore, expires time.Time) {
	if rapid.Bool().Draw(t, label+".hasNotBefore") {
		notBefore = now.Add(time.Duration(rapid.IntRange(-300, 300).Draw(t, label+".notBefore")) * time.Second)
	}
	if rapid.Bool().Draw(t, label+".hasExpires") {
		from := now
		if !notBefore.IsZero() {
			from = notBefore
		}
		expires = from.Add(time.Duration(rapid.IntRange(1, 600).Draw(t, label+".expires")) * time.Second)
		if notBefore.IsZero() && rapid.Bool().Draw(t, label+".expired") {
			expires = now.Add(-time.Duration(rapid.IntRange(0, 300).Draw(t, label+".ago")) * time.Second)
		}
	}
	return notBefore, expires
}

// world is a generated swarm as one node sees it, with a model of what
// its book should hold.
type world struct {
	clock   *clock
	self    ident
	founder ident
	keys    []ident // candidate admins besides the founder
	hosts   []ident // nodes whose agents the cards describe
	foreign ident   // the founder of another swarm
	book    *authority.Book

	admins     map[peer.ID]bool // now
	grants     []modelGrant
	revoked    map[uint64]bool
	trusts     map[[2]string]authority.Trust // by peer, agent
	trustOrder [][2]string
}

type modelGrant struct {
	g        authority.Grant
	accepted bool
}

func (w *world) identOf(p peer.ID) ident {
	for _, i := range slices.Concat([]ident{w.founder, w.foreign}, w.keys, w.hosts) {
		if i.id == p {
			return i
		}
	}
	panic("unknown identity")
}

// drawSigner draws who signs a record about host: the founder, a candidate
// admin, the host itself (self-signed), or another swarm's founder.
func (w *world) drawSigner(t *rapid.T, host ident, label string) ident {
	signers := slices.Concat([]ident{w.founder, w.founder}, w.keys, []ident{host, w.foreign})
	return signers[rapid.IntRange(0, len(signers)-1).Draw(t, label)]
}

// updates draws and applies up to 3 admin-log updates, checking the
// book's verdict against the model.
func (w *world) updates(t *rapid.T, label string) {
	for i := range rapid.IntRange(0, 3).Draw(t, label+".n") {
		l := fmt.Sprintf("%s[%d]", label, i)
		var add, remove []peer.ID
		for _, k := range w.keys {
			switch rapid.IntRange(0, 2).Draw(t, l+".op."+k.id.String()[len(k.id.String())-4:]) {
			case 1:
				add = append(add, k.id)
			case 2:
				if w.admins[k.id] {
					remove = append(remove, k.id)
				}
			}
		}
		if len(add)+len(remove) == 0 {
			continue
		}
		signers := append([]ident{w.founder}, w.keys...)
		signer := signers[rapid.IntRange(0, len(signers)-1).Draw(t, l+".signer")]
		s := nextUpdate(t, w.book, signer, add, remove)
		changed, err := w.book.AddUpdate(s)
		if !w.admins[signer.id] {
			if err == nil {
				t.Fatalf("update signed by non-admin %s applied", signer.id)
			}
			checkInvalid(t, err, "update", "not an admin")
			continue
		}
		if err != nil || !changed {
			t.Fatalf("update by admin: changed %v, err %v", changed, err)
		}
		for _, p := range add {
			w.admins[p] = true
		}
		for _, p := range remove {
			delete(w.admins, p)
		}
	}
}

func drawWorld(t *rapid.T) *world {
	seeds := rapid.SliceOfNDistinct(rapid.Uint64(), 9, 9, rapid.ID[uint64]).Draw(t, "seeds")
	w := &world{clock: newClock(), revoked: map[uint64]bool{}, trusts: map[[2]string]authority.Trust{}}
	w.self = identFrom(t, seeds[0])
	w.founder = identFrom(t, seeds[1])
	w.foreign = identFrom(t, seeds[2])
	for _, s := range seeds[3:6] {
		w.keys = append(w.keys, identFrom(t, s))
	}
	for _, s := range seeds[6:9] {
		w.hosts = append(w.hosts, identFrom(t, s))
	}
	w.book = authority.NewBook(w.self.id, w.founder.id, w.clock.Now)
	w.admins = map[peer.ID]bool{w.founder.id: true}
	now := w.clock.Now()

	w.updates(t, "log")

	serial := uint64(0)
	for i := range rapid.IntRange(0, 8).Draw(t, "records") {
		l := fmt.Sprintf("rec[%d]", i)
		host := w.hosts[rapid.IntRange(0, len(w.hosts)-1).Draw(t, l+".host")]
		signer := w.drawSigner(t, host, l+".signer")
		auth := w.founder.id
		if signer.id == w.foreign.id || rapid.IntRange(0, 9).Draw(t, l+".foreign") == 0 {
			auth = w.foreign.id
		}
		ok := auth == w.founder.id && w.admins[signer.id]
		if rapid.IntRange(0, 3).Draw(t, l+".kind") == 0 {
			r := authority.Revocation{Authority: auth, Serial: rapid.Uint64Range(1, serial+1).Draw(t, l+".serial"), Peer: host.id, At: now}
			_, _, _, err := w.book.AddRevocation(mustSealRevocation(t, r, signer))
			if ok != (err == nil) {
				t.Fatalf("AddRevocation by %s for %s: err %v, want accepted=%v", signer.id, auth, err, ok)
			}
			if ok {
				w.revoked[r.Serial] = true
			}
			continue
		}
		serial++
		g := authority.Grant{Authority: auth, Serial: serial, Peer: host.id, MaxTier: drawTier(t, l+".maxTier"),
			Sandboxes: drawSubset(t, sandboxNames, l+".sandboxes"), Capabilities: drawSubset(t, capNames, l+".caps")}
		if rapid.Bool().Draw(t, l+".oneAgent") {
			g.Agent = rapid.SampledFrom(agentNames).Draw(t, l+".agent")
		}
		g.NotBefore, g.Expires = drawWindow(t, now, l)
		_, changed, err := w.book.AddGrant(mustSealGrant(t, g, signer))
		ok = ok && !w.revoked[serial]
		if ok != (err == nil) || changed != ok {
			t.Fatalf("AddGrant %+v by %s: changed %v, err %v; want accepted=%v", g, signer.id, changed, err, ok)
		}
		g.Issuer = signer.id
		w.grants = append(w.grants, modelGrant{g: g, accepted: ok})
	}

	w.updates(t, "later")

	for i := range rapid.IntRange(0, 3).Draw(t, "trusts") {
		l := fmt.Sprintf("trust[%d]", i)
		tr := authority.Trust{Peer: w.hosts[rapid.IntRange(0, len(w.hosts)-1).Draw(t, l+".host")].id,
			MaxTier: drawTier(t, l+".maxTier"), Sandboxes: drawSubset(t, sandboxNames, l+".sandboxes"),
			Capabilities: drawSubset(t, capNames, l+".caps")}
		if rapid.Bool().Draw(t, l+".oneAgent") {
			tr.Agent = rapid.SampledFrom(agentNames).Draw(t, l+".agent")
		}
		if rapid.Bool().Draw(t, l+".expires") {
			tr.Expires = now.Add(time.Duration(rapid.IntRange(-100, 600).Draw(t, l+".ttl")) * time.Second)
		}
		if err := w.book.SetTrust(tr); err != nil {
			t.Fatalf("SetTrust: %v", err)
		}
		k := [2]string{string(tr.Peer), tr.Agent}
		if _, ok := w.trusts[k]; !ok {
			w.trustOrder = append(w.trustOrder, k)
		}
		w.trusts[k] = tr
	}

	w.clock.Advance(time.Duration(rapid.IntRange(0, 400).Draw(t, "advance")) * time.Second)
	return w
}

// basis is one grant or trust that counts for a card, in the model.
type basis struct {
	grant     bool
	maxTier   tiers.Tier
	sandboxes []string
	caps      []string
	expires   time.Time
}

// bases returns the model's bases that count for card c now.
func (w *world) bases(c agentcard.Card) []basis {
	now := w.clock.Now()
	var out []basis
	for _, m := range w.grants {
		g := m.g
		switch {
		case !m.accepted, w.revoked[g.Serial], !w.admins[g.Issuer],
			g.Peer.String() != c.Host, g.Agent != "" && g.Agent != c.ID,
			!g.NotBefore.IsZero() && now.Before(g.NotBefore),
			!g.Expires.IsZero() && !now.Before(g.Expires):
			continue
		}
		out = append(out, basis{grant: true, maxTier: g.MaxTier, sandboxes: g.Sandboxes, caps: g.Capabilities, expires: g.Expires})
	}
	for _, k := range w.trustOrder {
		tr := w.trusts[k]
		if tr.Peer.String() != c.Host || tr.Agent != "" && tr.Agent != c.ID || !tr.Expires.IsZero() && !now.Before(tr.Expires) {
			continue
		}
		out = append(out, basis{maxTier: tr.MaxTier, sandboxes: tr.Sandboxes, caps: tr.Capabilities, expires: tr.Expires})
	}
	return out
}

// cards draws one card per host and agent (and one of the foreign
// swarm's), each with its own claim.
func (w *world) cards(t *rapid.T) []agentcard.Card {
	var out []agentcard.Card
	claimSandboxes := append([]string{"", "", "elsewhere"}, sandboxNames...)
	for _, h := range append(slices.Clone(w.hosts), w.foreign) {
		for _, a := range agentNames {
			l := a + "@" + h.id.String()
			out = append(out, card(a, h.id, drawTier(t, l+".tier"), rapid.SampledFrom(claimSandboxes).Draw(t, l+".sandbox"), capNames...))
		}
	}
	return out
}

func TestAuthority_EffectiveIsBoundedByItsBases(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		for _, c := range w.cards(t) {
			got := w.book.Effective(c)
			bs := w.bases(c)
			st := got.Standing()
			if ct, cs := got.Claimed(); ct != c.Tier || cs != c.SandboxID {
				t.Fatalf("%s: Claimed() = %s %q, want the claim %s %q", c.Address(), ct, cs, c.Tier, c.SandboxID)
			}
			if st.ClaimedTier != c.Tier || st.ClaimedSandbox != c.SandboxID {
				t.Fatalf("%s: Standing claims %s %q, want %s %q", c.Address(), st.ClaimedTier, st.ClaimedSandbox, c.Tier, c.SandboxID)
			}
			if again := w.book.Effective(got); !reflect.DeepEqual(again, got) {
				t.Fatalf("%s: Effective is not idempotent:\n%+v\n%+v", c.Address(), got.Standing(), again.Standing())
			}
			if again := w.book.Effective(c); !reflect.DeepEqual(again.Standing(), st) {
				t.Fatalf("%s: Effective is not deterministic:\n%+v\n%+v", c.Address(), st, again.Standing())
			}
			if len(bs) == 0 {
				if got.Tier != tiers.L3 || got.SandboxID != "" || st.Basis != agentcard.BasisNone || got.Vouched() {
					t.Fatalf("%s covered by nothing: held at %s %q on %s, want L3, no sandbox, none", c.Address(), got.Tier, got.SandboxID, st.Basis)
				}
				continue
			}
			floor, anyGrant, allCaps := tiers.L3, false, false
			var sbs, caps []string
			var expires time.Time
			for _, b := range bs {
				floor = min(floor, b.maxTier)
				anyGrant = anyGrant || b.grant
				sbs = append(sbs, b.sandboxes...)
				allCaps = allCaps || b.caps == nil
				caps = append(caps, b.caps...)
				if !b.expires.IsZero() && (expires.IsZero() || b.expires.Before(expires)) {
					expires = b.expires
				}
			}
			// The bound: never more privileged than the claim or the bases.
			if got.Tier < c.Tier || got.Tier < floor {
				t.Fatalf("%s claims %s, bases allow %s: held at %s", c.Address(), c.Tier, floor, got.Tier)
			}
			if got.SandboxID != "" && (got.SandboxID != c.SandboxID || !slices.Contains(sbs, got.SandboxID)) {
				t.Fatalf("%s claims sandbox %q, bases name %v: held in %q", c.Address(), c.SandboxID, sbs, got.SandboxID)
			}
			// And exactly what they allow.
			wantSB := ""
			if slices.Contains(sbs, c.SandboxID) {
				wantSB = c.SandboxID
			}
			wantBasis := agentcard.BasisTrust
			if anyGrant {
				wantBasis = agentcard.BasisGrant
			}
			if got.Tier != max(c.Tier, floor) || got.SandboxID != wantSB || st.Basis != wantBasis {
				t.Fatalf("%s claims %s %q: held at %s %q on %s, want %s %q on %s", c.Address(), c.Tier, c.SandboxID,
					got.Tier, got.SandboxID, st.Basis, max(c.Tier, floor), wantSB, wantBasis)
			}
			if !st.Expires.Equal(expires) {
				t.Fatalf("%s: standing expires %v, want %v", c.Address(), st.Expires, expires)
			}
			if allCaps {
				if st.Capabilities != nil {
					t.Fatalf("%s: standing covers %v, want all", c.Address(), st.Capabilities)
				}
			} else {
				slices.Sort(caps)
				caps = slices.Compact(caps)
				if !slices.Equal(st.Capabilities, caps) || st.Capabilities == nil {
					t.Fatalf("%s: standing covers %v, want %v", c.Address(), st.Capabilities, caps)
				}
			}
			for _, cp := range capNames {
				if got.Covers(cp) != (allCaps || slices.Contains(caps, cp)) {
					t.Fatalf("%s: Covers(%s) = %v with caps %v", c.Address(), cp, got.Covers(cp), caps)
				}
			}
		}
	})
}

// badGrants are the ways a grant fails to count.
var badGrants = []string{"self-signed", "foreign", "non-admin", "removed-admin", "expired", "not-yet-valid",
	"revoked", "revoked-first", "wrong-agent", "tampered"}

func TestAuthority_InvalidGrantsHoldAtLeastPrivilege(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seeds := rapid.SliceOfNDistinct(rapid.Uint64(), 6, 6, rapid.ID[uint64]).Draw(t, "seeds")
		self, founder, admin, host, other, foreign := identFrom(t, seeds[0]), identFrom(t, seeds[1]),
			identFrom(t, seeds[2]), identFrom(t, seeds[3]), identFrom(t, seeds[4]), identFrom(t, seeds[5])
		clk := newClock()
		now := clk.Now()
		book := authority.NewBook(self.id, founder.id, clk.Now)
		mustUpdate(t, book, founder, []peer.ID{admin.id}, nil)

		c := card("io", host.id, drawTier(t, "claim"), rapid.SampledFrom([]string{"", "lab"}).Draw(t, "sandbox"), "sum")
		g := authority.Grant{Authority: founder.id, Serial: rapid.Uint64Range(1, 1<<40).Draw(t, "serial"), Peer: host.id,
			MaxTier: drawTier(t, "maxTier"), Sandboxes: []string{"lab"}}
		if rapid.Bool().Draw(t, "oneAgent") {
			g.Agent = "io"
		}
		if rapid.Bool().Draw(t, "expires") {
			g.Expires = now.Add(time.Hour)
		}
		signer := rapid.SampledFrom([]ident{founder, admin}).Draw(t, "signer")
		kind := rapid.SampledFrom(badGrants).Draw(t, "kind")

		// The same grant, sealed properly, counts: the bad one's failure
		// is its flaw, not the test's setup.
		control := authority.NewBook(self.id, founder.id, clk.Now)
		mustAddGrant(t, control, mustSealGrant(t, g, founder))
		if got := control.Effective(c); got.Tier != max(c.Tier, g.MaxTier) || got.SandboxID != c.SandboxID {
			t.Fatalf("control: held at %s %q, want %s %q", got.Tier, got.SandboxID, max(c.Tier, g.MaxTier), c.SandboxID)
		}

		var addErr bool
		switch kind {
		case "self-signed":
			signer, addErr = host, true
		case "foreign":
			g.Authority, signer, addErr = foreign.id, foreign, true
		case "non-admin":
			signer, addErr = other, true
		case "removed-admin":
			signer = admin
		case "expired":
			g.NotBefore = time.Time{}
			g.Expires = now.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(t, "ago")) * time.Second)
		case "not-yet-valid":
			g.NotBefore = now.Add(time.Duration(rapid.IntRange(1, 3600).Draw(t, "in")) * time.Second)
			g.Expires = time.Time{}
		case "revoked-first":
			addErr = true
		case "wrong-agent":
			g.Agent = "europa"
		case "tampered":
			addErr = true
		}
		signed := mustSealGrant(t, g, signer)
		if kind == "revoked-first" {
			if _, _, _, err := book.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: founder.id, Serial: g.Serial}, signer)); err != nil {
				t.Fatalf("AddRevocation: %v", err)
			}
		}
		if kind == "tampered" {
			i := rapid.IntRange(0, len(signed)-1).Draw(t, "byte")
			signed[i] ^= rapid.ByteRange(1, 255).Draw(t, "mask")
			_, err := authority.OpenGrant(signed)
			checkInvalid(t, err, "grant")
		}
		_, _, err := book.AddGrant(signed)
		if addErr {
			if err == nil {
				t.Fatalf("AddGrant of a %s grant accepted", kind)
			}
			checkInvalid(t, err, "grant")
		} else if err != nil {
			t.Fatalf("AddGrant of a %s grant: %v", kind, err)
		}
		switch kind {
		case "removed-admin":
			mustUpdate(t, book, founder, nil, []peer.ID{admin.id})
		case "revoked":
			r, dropped, changed, err := book.AddRevocation(mustSealRevocation(t, authority.Revocation{Authority: founder.id, Serial: g.Serial, Peer: host.id}, signer))
			if err != nil || !changed || dropped.Grant.Serial != g.Serial || r.Serial != g.Serial {
				t.Fatalf("AddRevocation: dropped %d, changed %v, err %v", dropped.Grant.Serial, changed, err)
			}
		}

		got := book.Effective(c)
		if got.Tier != tiers.L3 || got.SandboxID != "" || got.Standing().Basis != agentcard.BasisNone || got.Vouched() || got.Covers("sum") {
			t.Fatalf("%s grant: %s held at %s %q on %s, want L3, no sandbox, none", kind, c.Address(), got.Tier, got.SandboxID, got.Standing().Basis)
		}
		if ct, cs := got.Claimed(); ct != c.Tier || cs != c.SandboxID {
			t.Fatalf("Claimed() = %s %q, want %s %q", ct, cs, c.Tier, c.SandboxID)
		}
		if (c.Tier != tiers.L3 || c.SandboxID != "") && got.Standing().Note == "" {
			t.Fatalf("%s grant: a refused claim has no note", kind)
		}
	})
}

func TestAuthority_LocalCardsAreUnchanged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seeds := rapid.SliceOfNDistinct(rapid.Uint64(), 3, 3, rapid.ID[uint64]).Draw(t, "seeds")
		self, founder, other := identFrom(t, seeds[0]), identFrom(t, seeds[1]), identFrom(t, seeds[2])
		book := authority.NewBook(self.id, founder.id, nil)
		tier := drawTier(t, "tier")
		sb := rapid.SampledFrom(append([]string{""}, sandboxNames...)).Draw(t, "sandbox")
		var c agentcard.Card
		switch rapid.IntRange(0, 2).Draw(t, "how") {
		case 0: // registered here
			c = card("io", self.id, tier, sb)
			c.Origin = agentcard.OriginLocal
		case 1: // local, with no host (a registry without a peer ID)
			c = card("io", "", tier, sb)
			c.Host, c.Origin = "", agentcard.OriginLocal
		case 2: // local origin, whatever the host says
			c = card("io", other.id, tier, sb)
			c.Origin = agentcard.OriginLocal
		}
		if got := book.Effective(c); !reflect.DeepEqual(got, c) {
			t.Fatalf("local card changed: %+v -> %+v", c, got)
		}
	})
}

func TestAuthority_SealOpenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seeds := rapid.SliceOfNDistinct(rapid.Uint64(), 4, 4, rapid.ID[uint64]).Draw(t, "seeds")
		signer, auth, p, q := identFrom(t, seeds[0]), identFrom(t, seeds[1]), identFrom(t, seeds[2]), identFrom(t, seeds[3])
		when := func(label string) time.Time {
			if rapid.Bool().Draw(t, label+".zero") {
				return time.Time{}
			}
			return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, label), 0).UTC()
		}

		g := authority.Grant{Authority: auth.id, Serial: rapid.Uint64Min(1).Draw(t, "serial"), Peer: p.id,
			MaxTier: drawTier(t, "maxTier"), Sandboxes: drawSubset(t, sandboxNames, "sandboxes"),
			Capabilities: drawSubset(t, capNames, "caps"), NotBefore: when("notBefore"), Expires: when("expires")}
		if rapid.Bool().Draw(t, "oneAgent") {
			g.Agent = rapid.SampledFrom(agentNames).Draw(t, "agent")
		}
		if !g.NotBefore.IsZero() && !g.Expires.IsZero() && !g.Expires.After(g.NotBefore) {
			g.Expires = g.NotBefore.Add(time.Second)
		}
		sg, err := authority.SealGrant(g, signer.key)
		if isEpoch(g.NotBefore) || isEpoch(g.Expires) {
			// The wire reads 0 as no bound: such a grant is refused, not
			// turned into one without a bound.
			checkInvalid(t, err, "grant", "epoch")
		} else {
			if err != nil {
				t.Fatalf("SealGrant(%+v): %v", g, err)
			}
			og, err := authority.OpenGrant(sg)
			if err != nil {
				t.Fatalf("OpenGrant: %v", err)
			}
			if og.Issuer != signer.id {
				t.Fatalf("grant issuer %s, want %s", og.Issuer, signer.id)
			}
			if !sameGrant(g, og) {
				t.Fatalf("grant round trip:\n%+v\n%+v", g, og)
			}
		}

		r := authority.Revocation{Authority: auth.id, Serial: rapid.Uint64Min(1).Draw(t, "rserial"),
			Reason: rapid.StringN(0, 64, 256).Draw(t, "reason"), At: when("at")}
		if rapid.Bool().Draw(t, "rpeer") {
			r.Peer = p.id
		}
		sr, err := authority.SealRevocation(r, signer.key)
		if isEpoch(r.At) {
			checkInvalid(t, err, "revocation", "epoch")
		} else {
			if err != nil {
				t.Fatalf("SealRevocation(%+v): %v", r, err)
			}
			or, err := authority.OpenRevocation(sr)
			if err != nil {
				t.Fatalf("OpenRevocation: %v", err)
			}
			if or.Issuer != signer.id || or.Authority != r.Authority || or.Serial != r.Serial || or.Peer != r.Peer ||
				or.Reason != r.Reason || !or.At.Equal(r.At) {
				t.Fatalf("revocation round trip:\n%+v\n%+v", r, or)
			}
		}

		u := authority.Update{Authority: auth.id, Seq: rapid.Uint64Min(1).Draw(t, "seq")}
		if u.Seq > 1 {
			u.Prev = authority.Hash(rapid.SliceOf(rapid.Byte()).Draw(t, "prev"))
		}
		for _, k := range []ident{signer, p, q} {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 1:
				u.Add = append(u.Add, k.id)
			case 2:
				u.Remove = append(u.Remove, k.id)
			}
		}
		if len(u.Add)+len(u.Remove) == 0 {
			u.Add = []peer.ID{q.id}
		}
		su, err := authority.SealUpdate(u, signer.key)
		if err != nil {
			t.Fatalf("SealUpdate(%+v): %v", u, err)
		}
		ou, err := authority.OpenUpdate(su)
		if err != nil {
			t.Fatalf("OpenUpdate: %v", err)
		}
		if ou.Issuer != signer.id || ou.Authority != u.Authority || ou.Seq != u.Seq || ou.Prev != u.Prev ||
			!slices.Equal(ou.Add, u.Add) || !slices.Equal(ou.Remove, u.Remove) {
			t.Fatalf("update round trip:\n%+v\n%+v", u, ou)
		}
	})
}

// sameGrant compares grants as the wire carries them, Issuer aside: empty
// and nil sandboxes alike, capabilities nil (all) apart from empty (none).
func sameGrant(a, b authority.Grant) bool {
	return a.Authority == b.Authority && a.Serial == b.Serial && a.Peer == b.Peer && a.Agent == b.Agent &&
		a.MaxTier == b.MaxTier && slices.Equal(a.Sandboxes, b.Sandboxes) &&
		slices.Equal(a.Capabilities, b.Capabilities) && (a.Capabilities == nil) == (b.Capabilities == nil) &&
		a.NotBefore.Equal(b.NotBefore) && a.Expires.Equal(b.Expires)
}

func isEpoch(t time.Time) bool { return !t.IsZero() && t.Unix() == 0 }

// errorsAs is errors.As for the fuzz targets' and tests' brevity.
func errorsAs[E error](err error) (E, bool) {
	var e E
	ok := errors.As(err, &e)
	return e, ok
}

// TestAuthority_AdminLogForksConverge: admins on different nodes extend
// the admin log concurrently (forks at any height), and nodes pass each
// other their logs in any order. Once every node has seen every log, all
// hold the same log and the same admins, and a node handed every update
// ever signed, in any order, agrees with them.
func TestAuthority_AdminLogForksConverge(t *testing.T) {
	keys := []ident{identFrom(t, 301), identFrom(t, 302), identFrom(t, 303), identFrom(t, 304)}
	founder := keys[0]
	rapid.Check(t, func(t *rapid.T) {
		self := identFrom(t, 300)
		books := make([]*authority.Book, 3)
		for i := range books {
			books[i] = authority.NewBook(self.id, founder.id, nil)
		}
		var signed [][]byte
		share := func(from, to *authority.Book) {
			for _, u := range from.Log() {
				_, _ = to.AddUpdate(u)
			}
		}
		for i := range rapid.IntRange(1, 12).Draw(t, "steps") {
			l := fmt.Sprintf("step%d", i)
			b := books[rapid.IntRange(0, len(books)-1).Draw(t, l+".book")]
			if rapid.Bool().Draw(t, l+".share") {
				share(books[rapid.IntRange(0, len(books)-1).Draw(t, l+".from")], b)
				continue
			}
			signer := keys[rapid.IntRange(0, len(keys)-1).Draw(t, l+".signer")]
			other := keys[rapid.IntRange(1, len(keys)-1).Draw(t, l+".other")]
			var add, remove []peer.ID
			if rapid.Bool().Draw(t, l+".remove") {
				remove = []peer.ID{other.id}
			} else {
				add = []peer.ID{other.id}
			}
			n, head := b.Head()
			u, err := authority.SealUpdate(authority.Update{Authority: founder.id, Seq: n + 1, Prev: head, Add: add, Remove: remove}, signer.key)
			if err != nil {
				t.Fatalf("SealUpdate: %v", err)
			}
			if _, err := b.AddUpdate(u); err == nil {
				signed = append(signed, u)
			}
		}
		// Gossip until nothing changes: every pair, in both directions.
		for round := 0; ; round++ {
			if round > 2*len(signed)+2 {
				t.Fatalf("logs still change after %d rounds", round)
			}
			before := make([][32]byte, len(books))
			for i, b := range books {
				_, before[i] = b.Head()
			}
			for _, from := range books {
				for _, to := range books {
					share(from, to)
				}
			}
			same := true
			for i, b := range books {
				if _, h := b.Head(); h != before[i] {
					same = false
				}
			}
			if same {
				break
			}
		}
		n0, h0 := books[0].Head()
		for i, b := range books[1:] {
			if n, h := b.Head(); n != n0 || h != h0 || !slices.Equal(b.Admins(), books[0].Admins()) {
				t.Fatalf("book %d holds %d updates (admins %v), book 0 %d (admins %v)", i+1, n, b.Admins(), n0, books[0].Admins())
			}
		}
		// Every update ever signed, in a drawn order, repeated until
		// nothing changes.
		fresh := authority.NewBook(self.id, founder.id, nil)
		order := rapid.Permutation(signed).Draw(t, "order")
		for range len(order) + 1 {
			for _, u := range order {
				_, _ = fresh.AddUpdate(u)
			}
		}
		if n, h := fresh.Head(); n != n0 || h != h0 {
			t.Fatalf("a node handed every update holds %d updates, the others %d", n, n0)
		}
	})
}
