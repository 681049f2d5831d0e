package agentcard_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// verdict is how a fake assessor holds one card.
type verdict struct {
	tier    tiers.Tier
	sandbox string
	basis   agentcard.Basis
}

// fakeAssessor holds the cards it has a verdict for at that verdict and
// every other remote card at L3 with no sandbox; it records the cards it
// was asked about.
type fakeAssessor struct {
	t        *testing.T
	verdicts map[string]verdict // by address
	asked    []string
}

func (f *fakeAssessor) assess(c agentcard.Card) agentcard.Card {
	if c.Origin == agentcard.OriginLocal {
		f.t.Errorf("assessor asked about local card %s", c.Address())
	}
	f.asked = append(f.asked, c.Address())
	v, ok := f.verdicts[c.Address()]
	if !ok {
		v = verdict{tiers.L3, "", agentcard.BasisNone}
	}
	return agentcard.WithStanding(c, v.tier, v.sandbox, agentcard.Standing{Basis: v.basis})
}

// assessedRegistry holds local sun (L0) and remote io@a (claims L0 in lab,
// held at L2 in lab on a grant) and europa@b (claims L1, held at L3).
func assessedRegistry(t *testing.T) (*agentcard.Registry, *fakeAssessor, *fakeClock, string, string) {
	t.Helper()
	nodes := testNodes(t)
	clk := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clk.Now))
	sun := sampleCard("sun", "plan")
	sun.Tier = tiers.L0
	mustRegister(t, r, sun)
	io := remoteCard("io", nodes[1].id, 1, "sum")
	io.Tier, io.SandboxID = tiers.L0, "lab"
	europa := remoteCard("europa", nodes[2].id, 1, "sum")
	europa.Tier = tiers.L1
	mustMerge(t, r, io)
	mustMerge(t, r, europa)
	f := &fakeAssessor{t: t, verdicts: map[string]verdict{io.Address(): {tiers.L2, "lab", agentcard.BasisGrant}}}
	r.SetAssessor(f.assess)
	return r, f, clk, io.Address(), europa.Address()
}

func TestRegistryAssessorLookups(t *testing.T) {
	r, f, _, ioAddr, europaAddr := assessedRegistry(t)
	if !slices.Contains(f.asked, ioAddr) || !slices.Contains(f.asked, europaAddr) {
		t.Fatalf("SetAssessor did not assess the cards held: asked %v", f.asked)
	}
	check := func(what string, c agentcard.Card) {
		t.Helper()
		var want verdict
		var claimT tiers.Tier
		var claimSB string
		switch c.Address() {
		case ioAddr:
			want, claimT, claimSB = verdict{tiers.L2, "lab", agentcard.BasisGrant}, tiers.L0, "lab"
		case europaAddr:
			want, claimT = verdict{tiers.L3, "", agentcard.BasisNone}, tiers.L1
		default: // local sun
			want, claimT = verdict{tiers.L0, "", agentcard.BasisLocal}, tiers.L0
		}
		if c.Tier != want.tier || c.SandboxID != want.sandbox || c.Standing().Basis != want.basis {
			t.Errorf("%s: %s held at %s %q on %s, want %s %q on %s", what, c.Address(), c.Tier, c.SandboxID, c.Standing().Basis,
				want.tier, want.sandbox, want.basis)
		}
		if ct, cs := c.Claimed(); ct != claimT || cs != claimSB {
			t.Errorf("%s: %s claims %s %q, want %s %q", what, c.Address(), ct, cs, claimT, claimSB)
		}
	}
	for _, addr := range []string{ioAddr, europaAddr, "sun"} {
		c, ok := r.Get(addr)
		if !ok {
			t.Fatalf("Get(%s) missed", addr)
		}
		check("Get", c)
		c, ok = r.GetShared(addr)
		if !ok {
			t.Fatalf("GetShared(%s) missed", addr)
		}
		check("GetShared", c)
		c, _, ok = r.GetSharedAddr(addr)
		if !ok {
			t.Fatalf("GetSharedAddr(%s) missed", addr)
		}
		check("GetSharedAddr", c)
		c, err := r.Resolve(addr)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", addr, err)
		}
		check("Resolve", c)
		c, _, err = r.ResolveShared(addr)
		if err != nil {
			t.Fatalf("ResolveShared(%s): %v", addr, err)
		}
		check("ResolveShared", c)
	}
	for _, id := range []string{"io", "europa"} {
		c, err := r.Resolve(id)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", id, err)
		}
		check("Resolve bare", c)
		for _, c := range r.ByID(id) {
			check("ByID", c)
		}
	}
	lists := map[string][]agentcard.Card{"List": r.List(), "Remote": r.Remote(), "FindByCapability": r.FindByCapability("sum")}
	if cs, err := r.ResolveCapability("sum"); err != nil {
		t.Fatal(err)
	} else {
		lists["ResolveCapability"] = cs
	}
	for what, cs := range lists {
		if len(cs) == 0 {
			t.Fatalf("%s returned nothing", what)
		}
		for _, c := range cs {
			check(what, c)
		}
	}
	c, _, ok := r.FirstByCapabilityShared("sum")
	if !ok {
		t.Fatal("FirstByCapabilityShared(sum) missed")
	}
	check("FirstByCapabilityShared", c)

	// FindByTier indexes by the effective tier, never by the claim.
	addrs := func(cs []agentcard.Card) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Address())
		}
		return out
	}
	for tier, want := range map[tiers.Tier][]string{
		tiers.L0: {"sun@" + testNodes(t)[0].id.String()},
		tiers.L1: nil,
		tiers.L2: {ioAddr},
		tiers.L3: {europaAddr},
	} {
		if got := addrs(r.FindByTier(tier)); !slices.Equal(got, want) {
			t.Errorf("FindByTier(%s) = %v, want %v", tier, got, want)
		}
	}
}

func TestRegistryAssessorLocalCards(t *testing.T) {
	r, f, _, _, _ := assessedRegistry(t)
	f.asked = nil
	c := sampleCard("venus")
	c.Tier, c.SandboxID = tiers.L1, "lab"
	mustRegister(t, r, c)
	r.Reassess()
	got, ok := r.Get("venus")
	if !ok {
		t.Fatal("Get(venus) missed")
	}
	if got.Tier != tiers.L1 || got.SandboxID != "lab" || got.Standing().Basis != agentcard.BasisLocal || !got.Vouched() {
		t.Fatalf("local card held at %s %q on %s", got.Tier, got.SandboxID, got.Standing().Basis)
	}
	for _, a := range f.asked {
		if a == got.Address() {
			t.Fatalf("assessor asked about local card %s", a)
		}
	}
	// A card taken from a lookup, assessed, and registered as local keeps
	// no trace of that assessment.
	io := mustGet(t, r, ioAddrOf(t))
	io.Host, io.Origin, io.Tier = "", agentcard.OriginLocal, tiers.L1
	mustRegister(t, r, io)
	got = mustGet(t, r, "io")
	if st := got.Standing(); st.Basis != agentcard.BasisLocal || st.ClaimedTier != tiers.L1 || got.Tier != tiers.L1 {
		t.Fatalf("re-registered card: %s on %+v", got.Tier, st)
	}
}

func ioAddrOf(t *testing.T) string { return "io@" + testNodes(t)[1].id.String() }

func TestRegistryAssessorSerialize(t *testing.T) {
	r, f, clk, ioAddr, europaAddr := assessedRegistry(t)
	data, err := r.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	back, err := agentcard.Deserialize(data, testNodes(t)[0].id, agentcard.WithClock(clk.Now))
	if err != nil {
		t.Fatalf("Deserialize: %v", err)
	}
	// Without an assessor, the restored cards stand on their claims, as signed.
	for addr, want := range map[string]tiers.Tier{ioAddr: tiers.L0, europaAddr: tiers.L1} {
		c, ok := back.Get(addr)
		if !ok {
			t.Fatalf("Get(%s) after Deserialize missed", addr)
		}
		if c.Tier != want || c.Standing().Basis != agentcard.BasisClaim {
			t.Fatalf("%s serialized at %s on %s, want its claim %s", addr, c.Tier, c.Standing().Basis, want)
		}
	}
	if c, _ := back.Get(ioAddr); c.SandboxID != "lab" {
		t.Fatalf("io serialized in sandbox %q, want its claim lab", c.SandboxID)
	}
	again, err := back.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Fatalf("Serialize after Deserialize differs:\n%s\n%s", data, again)
	}
	// With the assessor, the restored registry holds them as the first did.
	back.SetAssessor(f.assess)
	for _, addr := range []string{ioAddr, europaAddr} {
		want, _ := r.Get(addr)
		got, _ := back.Get(addr)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: restored and assessed %+v, want %+v", addr, got.Standing(), want.Standing())
		}
	}

	// A refresh of an equal revision moves LastSeenAt in what lookups
	// return and in what Serialize writes, and keeps the assessed view.
	clk.Advance(time.Minute)
	io, _ := r.Get(ioAddr)
	io.Tier, io.SandboxID = tiers.L0, "lab" // the claim, as its host signed it
	if mustMerge(t, r, io) {
		t.Fatal("refresh of an equal revision reported a change")
	}
	got, _ := r.Get(ioAddr)
	if got.LastSeenAt != clk.Now().UnixMilli() || got.Tier != tiers.L2 {
		t.Fatalf("after refresh: LastSeenAt %d (want %d), tier %s", got.LastSeenAt, clk.Now().UnixMilli(), got.Tier)
	}
	data, err = r.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	back, err = agentcard.Deserialize(data, testNodes(t)[0].id, agentcard.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := back.Get(ioAddr); c.LastSeenAt != got.LastSeenAt || c.Tier != tiers.L0 {
		t.Fatalf("serialized after refresh: LastSeenAt %d, tier %s", c.LastSeenAt, c.Tier)
	}
}

func TestRegistryReassess(t *testing.T) {
	r, f, _, ioAddr, europaAddr := assessedRegistry(t)
	l := r.Lease()
	if changed := r.Reassess(); len(changed) != 0 {
		t.Fatalf("Reassess with nothing changed = %d cards", len(changed))
	}
	if !r.Holds(l) {
		t.Fatal("Reassess with nothing changed ended the lease")
	}

	// europa gains a grant: it moves to L1 (its claim) in the tier index.
	f.verdicts[europaAddr] = verdict{tiers.L1, "", agentcard.BasisGrant}
	changed := r.Reassess()
	if len(changed) != 1 || changed[0].Address() != europaAddr || changed[0].Tier != tiers.L1 {
		t.Fatalf("Reassess = %+v, want europa at L1", changed)
	}
	if r.Holds(l) {
		t.Fatal("the lease holds after a card's view changed")
	}
	if cs := r.FindByTier(tiers.L1); len(cs) != 1 || cs[0].Address() != europaAddr {
		t.Fatalf("FindByTier(L1) = %v", cs)
	}
	if cs := r.FindByTier(tiers.L3); len(cs) != 0 {
		t.Fatalf("FindByTier(L3) = %d cards after europa moved", len(cs))
	}

	// A change of standing alone (same tier and sandbox) is a change.
	l = r.Lease()
	f.verdicts[ioAddr] = verdict{tiers.L2, "lab", agentcard.BasisTrust}
	if changed := r.Reassess(); len(changed) != 1 || changed[0].Standing().Basis != agentcard.BasisTrust {
		t.Fatalf("Reassess = %+v, want io on trust", changed)
	}
	if r.Holds(l) {
		t.Fatal("the lease holds after a card's standing changed")
	}

	// Removing the assessor returns every card to its claim.
	l = r.Lease()
	r.SetAssessor(nil)
	if r.Holds(l) {
		t.Fatal("the lease holds after the assessor was removed")
	}
	for addr, want := range map[string]tiers.Tier{ioAddr: tiers.L0, europaAddr: tiers.L1} {
		c, _ := r.Get(addr)
		if c.Tier != want || c.Standing().Basis != agentcard.BasisClaim {
			t.Fatalf("%s without an assessor: %s on %s, want its claim %s", addr, c.Tier, c.Standing().Basis, want)
		}
	}
	l = r.Lease()
	if changed := r.Reassess(); len(changed) != 0 || !r.Holds(l) {
		t.Fatalf("Reassess without an assessor, twice: %d changed, lease holds %v", len(changed), r.Holds(l))
	}
}

// TestRegistryAssessedNewRevision: a card stored after SetAssessor is
// assessed when stored, and its new revisions too.
func TestRegistryAssessedNewRevision(t *testing.T) {
	r, f, _, ioAddr, _ := assessedRegistry(t)
	titan := remoteCard("titan", testNodes(t)[3].id, 1)
	titan.Tier = tiers.L0
	mustMerge(t, r, titan)
	if c, _ := r.Get(titan.Address()); c.Tier != tiers.L3 || c.Vouched() {
		t.Fatalf("new unvouched card held at %s, vouched %v", c.Tier, c.Vouched())
	}
	io, _ := r.Get(ioAddr)
	io.Tier, io.SandboxID, io.Revision = tiers.L1, "lab", 2
	f.verdicts[ioAddr] = verdict{tiers.L1, "lab", agentcard.BasisGrant}
	if !mustMerge(t, r, io) {
		t.Fatal("new revision not stored")
	}
	c, _ := r.Get(ioAddr)
	if c.Tier != tiers.L1 || c.Revision != 2 {
		t.Fatalf("new revision held at %s rev %d", c.Tier, c.Revision)
	}
	if ct, _ := c.Claimed(); ct != tiers.L1 {
		t.Fatalf("new revision claims %s, want L1", ct)
	}
	if sa := c.SandboxAgent(); sa.Unvouched || sa.Sandbox != "lab" || sa.ID != ioAddr {
		t.Fatalf("SandboxAgent() = %+v", sa)
	}
	if sa := mustGet(t, r, titan.Address()).SandboxAgent(); !sa.Unvouched || sa.Sandbox != "" {
		t.Fatalf("unvouched SandboxAgent() = %+v", sa)
	}
}

func mustGet(t *testing.T, r *agentcard.Registry, addr string) agentcard.Card {
	t.Helper()
	c, ok := r.Get(addr)
	if !ok {
		t.Fatalf("Get(%s) missed", addr)
	}
	return c
}
