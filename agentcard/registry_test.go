package agentcard_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// remoteCard returns a valid card hosted by host.
func remoteCard(id string, host peer.ID, rev uint64, caps ...string) agentcard.Card {
	c := sampleCard(id, caps...)
	c.Host = host.String()
	c.Revision = rev
	return c
}

func mustRegister(t *testing.T, r *agentcard.Registry, c agentcard.Card) agentcard.Card {
	t.Helper()
	s, err := r.Register(c)
	if err != nil {
		t.Fatalf("Register(%s): %v", c.ID, err)
	}
	return s
}

func mustMerge(t *testing.T, r *agentcard.Registry, c agentcard.Card) bool {
	t.Helper()
	changed, err := r.MergeRemote(c)
	if err != nil {
		t.Fatalf("MergeRemote(%s): %v", c.Address(), err)
	}
	return changed
}

func TestResolve(t *testing.T) {
	nodes := testNodes(t)
	self, a, b := nodes[0].id, nodes[1].id, nodes[2].id
	r := agentcard.NewRegistry(self)
	mustRegister(t, r, sampleCard("sun"))
	mustRegister(t, r, sampleCard("venus"))
	mustRegister(t, r, sampleCard("mars"))
	mustMerge(t, r, remoteCard("earth", a, 1))
	mustMerge(t, r, remoteCard("mars", a, 1))
	mustMerge(t, r, remoteCard("mars", b, 1))
	mustMerge(t, r, remoteCard("io", a, 1))
	mustMerge(t, r, remoteCard("io", b, 1))

	at := func(id string, p peer.ID) string { return id + "@" + p.String() }
	tests := []struct {
		addr       string
		want       string   // address of the card found
		candidates []string // for an ambiguous name
		where      string   // for not found
		invalid    bool     // malformed address
	}{
		{addr: "sun", want: at("sun", self)},
		{addr: at("sun", self), want: at("sun", self)},
		{addr: "earth", want: at("earth", a)},
		{addr: at("earth", a), want: at("earth", a)},
		{addr: at("mars", b), want: at("mars", b)},
		{addr: at("mars", self), want: at("mars", self)},
		{addr: "mars", candidates: sorted(at("mars", self), at("mars", a), at("mars", b))},
		{addr: "io", candidates: sorted(at("io", a), at("io", b))},
		{addr: "pluto", where: "local registry (3 agents) and 5 remote cards"},
		{addr: at("earth", b), where: "2 remote cards from " + b.String()},
		{addr: at("earth", self), where: "local registry (3 agents)"},
		{addr: "bad@@", invalid: true},
		{addr: "", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := r.Resolve(tt.addr)
			switch {
			case tt.want != "":
				if err != nil || got.Address() != tt.want {
					t.Fatalf("Resolve = %q, %v; want %q", got.Address(), err, tt.want)
				}
			case tt.candidates != nil:
				var ae *agentcard.AmbiguousError
				if !errors.As(err, &ae) || !errors.Is(err, agentcard.ErrAmbiguousAgent) {
					t.Fatalf("Resolve error = %v, want *AmbiguousError", err)
				}
				if ae.Name != tt.addr || !slices.Equal(ae.Candidates, tt.candidates) {
					t.Fatalf("ambiguous %q with %q, want %q", ae.Name, ae.Candidates, tt.candidates)
				}
				for _, c := range tt.candidates {
					if !strings.Contains(err.Error(), c) {
						t.Fatalf("message %q does not list %s", err, c)
					}
					if _, err := r.Resolve(c); err != nil {
						t.Fatalf("candidate %s does not resolve: %v", c, err)
					}
				}
			case tt.where != "":
				var nf *agentcard.NotFoundError
				if !errors.As(err, &nf) || !errors.Is(err, agentcard.ErrAgentNotFound) {
					t.Fatalf("Resolve error = %v, want *NotFoundError", err)
				}
				if nf.Query != tt.addr || nf.Where != tt.where {
					t.Fatalf("not found %q in %q, want %q", nf.Query, nf.Where, tt.where)
				}
				if !strings.Contains(err.Error(), tt.where) {
					t.Fatalf("message %q does not say where", err)
				}
			case tt.invalid:
				var ae *agentcard.AddressError
				if !errors.As(err, &ae) || !errors.Is(err, agentcard.ErrAgentNotFound) {
					t.Fatalf("Resolve error = %T %v, want *AddressError", err, err)
				}
			}
		})
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestGetIsExact(t *testing.T) {
	nodes := testNodes(t)
	self, a := nodes[0].id, nodes[1].id
	r := agentcard.NewRegistry(self)
	mustMerge(t, r, remoteCard("earth", a, 1))
	if _, ok := r.Get("earth"); ok {
		t.Fatal(`Get("earth") found a remote card; a bare id means local`)
	}
	if _, ok := r.Get("earth@" + a.String()); !ok {
		t.Fatal("Get of the full address failed")
	}
	if _, ok := r.Get("earth@nope"); ok {
		t.Fatal("Get of a malformed address found something")
	}
}

func TestRegisterStampsAndRejects(t *testing.T) {
	nodes := testNodes(t)
	self, other := nodes[0].id, nodes[1].id
	clock := newClock()
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now))
	c := sampleCard("venus")
	c.Origin = agentcard.OriginRemote
	c.LastSeenAt = 42
	c.Revision = 7
	c.SandboxID = "sandbox-a" // requirement 10.3: the card keeps its sandbox tag
	s := mustRegister(t, r, c)
	if s.Host != self.String() || s.Origin != agentcard.OriginLocal || s.LastSeenAt != clock.Now().UnixMilli() ||
		s.Revision != 7 || s.SandboxID != "sandbox-a" {
		t.Fatalf("stored %+v", s)
	}
	if got, _ := r.Get("venus"); got.SandboxID != "sandbox-a" {
		t.Fatalf("sandbox tag lost: %+v", got)
	}

	foreign := sampleCard("mars")
	foreign.Host = other.String()
	_, err := r.Register(foreign)
	var ice *agentcard.InvalidCardError
	if !errors.As(err, &ice) || !ice.HasField("host") {
		t.Fatalf("Register of a card hosted elsewhere = %v, want a host problem", err)
	}
	if _, ok := r.Get("mars"); ok {
		t.Fatal("a rejected card was stored")
	}
}

func TestRegisterRevisionOverflow(t *testing.T) {
	r := agentcard.NewRegistry(testNodes(t)[0].id)
	c := sampleCard("venus")
	c.Revision = ^uint64(0)
	mustRegister(t, r, c)
	c.Description = "changed"
	if _, err := r.Register(c); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("Register past the maximum revision = %v", err)
	}
}

func TestUnregister(t *testing.T) {
	nodes := testNodes(t)
	r := agentcard.NewRegistry(nodes[0].id)
	mustRegister(t, r, sampleCard("venus", "x"))
	mustMerge(t, r, remoteCard("mars", nodes[1].id, 1))
	if r.Unregister("mars") {
		t.Fatal("Unregister removed a remote card")
	}
	if !r.Unregister("venus") || r.Unregister("venus") {
		t.Fatal("Unregister did not report correctly")
	}
	if len(r.Local()) != 0 || len(r.FindByCapability("x")) != 0 || len(r.FindByTier(tiers.L2)) != 1 {
		t.Fatalf("indexes not cleaned: %v", addresses(r.List()))
	}
}

func TestRestore(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now))
	c := sampleCard("venus")
	c.Revision = 12
	c.LastSeenAt = 99
	if err := r.Restore(c); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Get("venus")
	if got.Revision != 12 || got.LastSeenAt != 99 || got.Origin != agentcard.OriginLocal || got.Host != nodes[0].id.String() {
		t.Fatalf("restored %+v", got)
	}
	// Registering the same data at startup keeps the persisted revision.
	if s := mustRegister(t, r, sampleCard("venus")); s.Revision != 12 {
		t.Fatalf("re-register after restore: revision %d, want 12", s.Revision)
	}
	remote := sampleCard("mars")
	remote.Origin = agentcard.OriginRemote
	if err := r.Restore(remote); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("Restore of a remote card = %v", err)
	}
	foreign := sampleCard("mars")
	foreign.Host = nodes[1].id.String()
	if err := r.Restore(foreign); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("Restore of a foreign card = %v", err)
	}
}

func TestMergeRemoteRevisions(t *testing.T) {
	nodes := testNodes(t)
	self, a := nodes[0].id, nodes[1].id
	addr := "earth@" + a.String()
	tests := []struct {
		name        string
		rev         uint64
		description string
		changed     bool
		wantRev     uint64
		wantDesc    string
	}{
		{"higher replaces", 6, "newer", true, 6, "newer"},
		{"equal refreshes only", 5, "same revision, other data", false, 5, "v5"},
		{"lower is ignored", 4, "older", false, 5, "v5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now))
			base := remoteCard("earth", a, 5)
			base.Description = "v5"
			if !mustMerge(t, r, base) {
				t.Fatal("first merge reported no change")
			}
			clock.Advance(time.Minute)
			next := remoteCard("earth", a, tt.rev)
			next.Description = tt.description
			if changed := mustMerge(t, r, next); changed != tt.changed {
				t.Fatalf("changed = %v, want %v", changed, tt.changed)
			}
			got, ok := r.Get(addr)
			if !ok || got.Revision != tt.wantRev || got.Description != tt.wantDesc {
				t.Fatalf("stored rev %d %q, want rev %d %q", got.Revision, got.Description, tt.wantRev, tt.wantDesc)
			}
			wantSeen := clock.Now().UnixMilli()
			if tt.rev < 5 {
				wantSeen = clock.Now().Add(-time.Minute).UnixMilli()
			}
			if got.LastSeenAt != wantSeen {
				t.Fatalf("LastSeenAt = %d, want %d", got.LastSeenAt, wantSeen)
			}
		})
	}
}

func TestMergeRemoteRejects(t *testing.T) {
	nodes := testNodes(t)
	self := nodes[0].id
	r := agentcard.NewRegistry(self)
	noHost := sampleCard("earth")
	mine := sampleCard("earth")
	mine.Host = self.String()
	invalid := remoteCard("earth", nodes[1].id, 1)
	invalid.Version = ""
	for name, c := range map[string]agentcard.Card{"no host": noHost, "self": mine, "invalid": invalid} {
		changed, err := r.MergeRemote(c)
		if changed || !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: MergeRemote = %v, %v", name, changed, err)
		}
	}
	if len(r.List()) != 0 {
		t.Fatal("a rejected card was stored")
	}
}

func TestRemoteTTL(t *testing.T) {
	nodes := testNodes(t)
	self, a, b := nodes[0].id, nodes[1].id, nodes[2].id
	clock := newClock()
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(10*time.Minute))
	mustRegister(t, r, sampleCard("sun", "plan"))
	mustMerge(t, r, remoteCard("earth", a, 1, "plan"))
	clock.Advance(6 * time.Minute)
	mustMerge(t, r, remoteCard("mars", b, 1, "plan"))

	steps := []struct {
		advance time.Duration
		refresh bool // re-merge earth (same revision) before checking
		visible []string
		expired int
	}{
		{0, false, []string{"sun", "earth", "mars"}, 0},
		{3*time.Minute + 59*time.Second, false, []string{"sun", "earth", "mars"}, 0}, // earth at 9m59s
		{time.Second, false, []string{"sun", "mars"}, 1},                             // earth at exactly 10m: gone
		{0, true, []string{"sun", "earth", "mars"}, 0},                               // earth merged again
		{6 * time.Minute, false, []string{"sun", "earth"}, 1},                        // mars at 10m
		{time.Hour, false, []string{"sun"}, 1},                                       // local cards never expire
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		if s.refresh {
			if mustMerge(t, r, remoteCard("earth", a, 1, "plan")) != true {
				t.Fatalf("step %d: re-merging an expired card is a change", i)
			}
		}
		var got []string
		for _, c := range r.List() {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, s.visible) {
			t.Fatalf("step %d: List() = %v, want %v", i, got, s.visible)
		}
		if n := len(r.FindByCapability("plan")); n != len(s.visible) {
			t.Fatalf("step %d: FindByCapability sees %d cards, want %d", i, n, len(s.visible))
		}
		if n := r.Expire(); n != s.expired {
			t.Fatalf("step %d: Expire() = %d, want %d", i, n, s.expired)
		}
	}
}

func TestExpiredCardAcceptsLowerRevision(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(time.Minute))
	mustMerge(t, r, remoteCard("earth", nodes[1].id, 9))
	clock.Advance(time.Minute)
	if !mustMerge(t, r, remoteCard("earth", nodes[1].id, 1)) {
		t.Fatal("an expired card still blocks a lower revision")
	}
}

func TestNoTTL(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(0))
	mustMerge(t, r, remoteCard("earth", nodes[1].id, 1))
	clock.Advance(1000 * time.Hour)
	if len(r.Remote()) != 1 || r.Expire() != 0 {
		t.Fatal("a zero TTL expired a card")
	}
}

func TestRemoveRemoteAndPeer(t *testing.T) {
	nodes := testNodes(t)
	self, a, b := nodes[0].id, nodes[1].id, nodes[2].id
	r := agentcard.NewRegistry(self)
	mustRegister(t, r, sampleCard("sun"))
	mustMerge(t, r, remoteCard("earth", a, 1))
	mustMerge(t, r, remoteCard("mars", a, 1))
	mustMerge(t, r, remoteCard("mars", b, 1))
	if r.RemoveRemote("sun@"+self.String()) || r.RemoveRemote("sun") {
		t.Fatal("RemoveRemote removed a local card")
	}
	if !r.RemoveRemote("mars@"+b.String()) || r.RemoveRemote("mars@"+b.String()) {
		t.Fatal("RemoveRemote did not report correctly")
	}
	if n := r.RemovePeer(self); n != 0 {
		t.Fatalf("RemovePeer(self) = %d", n)
	}
	if n := r.RemovePeer(a); n != 2 {
		t.Fatalf("RemovePeer(a) = %d, want 2", n)
	}
	if got := addresses(r.List()); !slices.Equal(got, []string{"sun@" + self.String()}) {
		t.Fatalf("left %v", got)
	}
	if _, err := r.Resolve("mars"); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("Resolve after removal = %v", err)
	}
}

func TestQueryOrder(t *testing.T) {
	nodes := testNodes(t)
	r := agentcard.NewRegistry(nodes[0].id)
	for _, id := range []string{"zeta", "alpha", "mid"} {
		mustRegister(t, r, sampleCard(id, "x"))
	}
	for i, n := range nodes[1:4] {
		mustMerge(t, r, remoteCard(fmt.Sprintf("r%d", 3-i), n.id, 1, "x"))
	}
	mars := remoteCard("mars", nodes[1].id, 1, "y")
	mars.Tier = tiers.L0
	mustMerge(t, r, mars)

	got := r.FindByCapability("x")
	if len(got) != 6 {
		t.Fatalf("FindByCapability = %v", addresses(got))
	}
	for i, c := range got {
		if local := i < 3; local != (c.Origin == agentcard.OriginLocal) {
			t.Fatalf("local cards are not first: %v", addresses(got))
		}
	}
	if !slices.IsSortedFunc(got[:3], byAddress) || !slices.IsSortedFunc(got[3:], byAddress) {
		t.Fatalf("not sorted: %v", addresses(got))
	}
	if first, addr, ok := r.FirstByCapabilityShared("x"); !ok || !reflect.DeepEqual(first, got[0]) || addr != got[0].Address() {
		t.Fatalf("FirstByCapabilityShared = %s, %v; FindByCapability = %v", addr, ok, addresses(got))
	}
	if l := r.FindByTier(tiers.L0); len(l) != 1 || l[0].ID != "mars" {
		t.Fatalf("FindByTier(L0) = %v", addresses(l))
	}
	if l := r.FindByTier(9); len(l) != 0 {
		t.Fatalf("FindByTier(9) = %v", addresses(l))
	}
	if len(r.List()) != 7 || len(r.Local()) != 3 || len(r.Remote()) != 4 {
		t.Fatalf("List/Local/Remote sizes wrong")
	}
	caps, err := r.ResolveCapability("y")
	if err != nil || len(caps) != 1 {
		t.Fatalf("ResolveCapability(y) = %v, %v", addresses(caps), err)
	}
}

func byAddress(a, b agentcard.Card) int { return strings.Compare(a.Address(), b.Address()) }

func TestReturnedCardsAreCopies(t *testing.T) {
	r := agentcard.NewRegistry(testNodes(t)[0].id)
	mustRegister(t, r, sampleCard("venus", "x"))
	c, _ := r.Get("venus")
	c.Capabilities[0].ID = "changed"
	c.Protocols[0] = "changed"
	again, _ := r.Get("venus")
	if again.Capabilities[0].ID != "x" || again.Protocols[0] != "a2a/1.0" {
		t.Fatal("Get returned shared memory")
	}
	if len(r.FindByCapability("x")) != 1 {
		t.Fatal("index corrupted by a caller's change")
	}
}

// TestQueryCardsAreIndependentCopies checks the copies of the list queries,
// whose slices share arrays with each other but not with the registry:
// changing or appending to one card's slices changes no other card, and
// nil and empty slices come back as they were stored.
func TestQueryCardsAreIndependentCopies(t *testing.T) {
	nodes := testNodes(t)
	r := agentcard.NewRegistry(nodes[0].id)
	mustRegister(t, r, benchCard())
	bare := sampleCard("bare")
	bare.Protocols, bare.Endpoints = nil, []agentcard.Endpoint{}
	bare.Capabilities = []agentcard.Capability{{ID: "x", InputSchema: json.RawMessage{}}}
	mustRegister(t, r, bare)
	mustRegister(t, r, sampleCard("empty"))
	c := benchCard()
	c.ID = "mercury"
	c.Host = nodes[1].id.String()
	mustMerge(t, r, c)

	want := r.List()
	for _, w := range want {
		if g, _ := r.Get(w.Address()); !reflect.DeepEqual(g, w) {
			t.Fatalf("List gave %+v, Get %+v", w, g)
		}
	}
	for i := range want {
		got := r.List()
		g := &got[i]
		for j := range g.Protocols {
			g.Protocols[j] = "changed"
		}
		for j := range g.Endpoints {
			g.Endpoints[j].Address = "changed"
		}
		for j := range g.Capabilities {
			g.Capabilities[j].ID = "changed"
			for k := range g.Capabilities[j].InputSchema {
				g.Capabilities[j].InputSchema[k] = ' '
			}
		}
		g.Protocols = append(g.Protocols, "appended")
		g.Endpoints = append(g.Endpoints, agentcard.Endpoint{Address: "appended"})
		g.Capabilities = append(g.Capabilities, agentcard.Capability{ID: "appended"})
		for j := range got {
			if j != i && !reflect.DeepEqual(got[j], want[j]) {
				t.Fatalf("changing %s changed %s: %+v", want[i].ID, want[j].ID, got[j])
			}
		}
		if again := r.List(); !reflect.DeepEqual(again, want) {
			t.Fatalf("changing %s changed the registry", want[i].ID)
		}
	}
}

func TestSerializeRoundTrip(t *testing.T) {
	nodes := testNodes(t)
	self, a := nodes[0].id, nodes[1].id
	clock := newClock()
	opts := []agentcard.Option{agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(10 * time.Minute)}
	r := agentcard.NewRegistry(self, opts...)
	mustRegister(t, r, sampleCard("sun", "plan"))
	mustRegister(t, r, sampleCard("venus"))
	mustMerge(t, r, remoteCard("earth", a, 3, "plan"))
	clock.Advance(6 * time.Minute)
	mustMerge(t, r, remoteCard("mars", a, 1))

	data, err := r.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	got, err := agentcard.Deserialize(data, self, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !cardsEqual(got.List(), r.List()) {
		t.Fatalf("Deserialize(Serialize()) lists\n%v\nwant\n%v", got.List(), r.List())
	}
	// Remote cards keep their age: earth expires on schedule.
	clock.Advance(5 * time.Minute)
	if ids := addresses(got.Remote()); len(ids) != 1 || !strings.HasPrefix(ids[0], "mars@") {
		t.Fatalf("after 11 minutes remote cards are %v, want only mars", ids)
	}
	if got.Self() != self {
		t.Fatal("Self() not kept")
	}
}

func TestDeserializeRejects(t *testing.T) {
	nodes := testNodes(t)
	self := nodes[0].id
	card := `{"id":"sun","name":"sun","version":"1.0.0","description":"","tier":0,"protocols":[],"endpoints":[],"capabilities":[],"revision":0,"origin":"local","lastSeenAt":0}`
	remoteSelf := strings.Replace(card, `"origin":"local"`, `"origin":"remote","host":"`+self.String()+`"`, 1)
	tests := map[string]string{
		"not json":       `{`,
		"null":           `null`,
		"unknown key":    `{"cards":[],"x":1}`,
		"invalid card":   `{"cards":[{"id":"sun"}]}`,
		"duplicate":      `{"cards":[` + card + `,` + card + `]}`,
		"remote self":    `{"cards":[` + remoteSelf + `]}`,
		"remote no host": `{"cards":[` + strings.Replace(card, `"local"`, `"remote"`, 1) + `]}`,
	}
	for name, in := range tests {
		if _, err := agentcard.Deserialize([]byte(in), self); !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: Deserialize = %v, want ErrInvalidCard", name, err)
		}
	}
	if r, err := agentcard.Deserialize([]byte(`{"cards":[`+card+`]}`), self); err != nil || len(r.Local()) != 1 {
		t.Fatalf("Deserialize of a valid document: %v", err)
	}
}

func cardsEqual(a, b []agentcard.Card) bool {
	return slices.EqualFunc(a, b, agentcard.Card.Equal)
}

// TestConcurrentUse exercises every method from several goroutines; run
// with -race.
func TestConcurrentUse(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(time.Minute))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("a%d", i%17)
				c := sampleCard(id, "x", fmt.Sprintf("c%d", i%5))
				c.Description = fmt.Sprint(i)
				switch g {
				case 0:
					_, _ = r.Register(c)
					r.Unregister(fmt.Sprintf("a%d", (i+3)%17))
				case 1:
					_, _ = r.MergeRemote(remoteCard(id, nodes[1+i%3].id, uint64(i)))
					clock.Advance(time.Second)
				case 2:
					_, _ = r.Resolve(id)
					r.FindByCapability("x")
					r.FindByTier(tiers.L2)
					r.Get(id)
				case 3:
					r.Expire()
					r.List()
					if i%50 == 0 {
						r.RemovePeer(nodes[2].id)
						_, _ = r.Serialize()
					}
				}
			}
		})
	}
	wg.Wait()
}

// Requirement 10.3: a sandboxed agent's card carries its sandbox id through
// registration, signing and remote merge, so routers and discovery filters
// can enforce sandbox boundaries on every node.
func TestRequirement10_3_SandboxTagTravelsWithTheCard(t *testing.T) {
	nodes := testNodes(t)
	a, b := nodes[1], nodes[2]
	regA := agentcard.NewRegistry(a.id)
	regB := agentcard.NewRegistry(b.id)
	c := sampleCard("titan")
	c.SandboxID = "ultra-sandbox-7"
	stored := mustRegister(t, regA, c)
	signed, err := agentcard.Seal(stored, a.key)
	if err != nil {
		t.Fatal(err)
	}
	opened, _, err := agentcard.Open(signed)
	if err != nil {
		t.Fatal(err)
	}
	mustMerge(t, regB, opened)
	got, err := regB.Resolve("titan")
	if err != nil || got.SandboxID != "ultra-sandbox-7" {
		t.Fatalf("remote copy has sandbox %q (%v)", got.SandboxID, err)
	}
}

// TestSharedCardsAreNeverModified checks the copy-on-write contract of the
// *Shared methods: a card they returned stays as it was however the
// registry changes afterwards, and appending to its slices does not reach
// the registry or other callers.
func TestSharedCardsAreNeverModified(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now))
	mustRegister(t, r, benchCard())
	remote := benchCard()
	remote.ID = "mercury"
	remote.Host = nodes[1].id.String()
	remote.Revision = 1
	mustMerge(t, r, remote)

	local, ok := r.GetShared("venus")
	if !ok {
		t.Fatal("GetShared(venus) found nothing")
	}
	rem, addr, ok := r.GetSharedAddr(remote.Address())
	if !ok || addr != remote.Address() {
		t.Fatalf("GetSharedAddr = %q, %v", addr, ok)
	}
	byCap, _, ok := r.FirstByCapabilityShared("codegen.react")
	if !ok || byCap.ID != "venus" {
		t.Fatalf("FirstByCapabilityShared = %q, %v", byCap.ID, ok)
	}
	resolved, _, err := r.ResolveShared("mercury")
	if err != nil {
		t.Fatal(err)
	}
	shared := []agentcard.Card{local, rem, byCap, resolved}
	want := make([]agentcard.Card, len(shared))
	for i, c := range shared {
		want[i] = c.Clone()
	}

	// Every write path, each changing the slices' contents.
	clock.Advance(time.Second)
	c := benchCard()
	c.Protocols[0] = "a2a/2.0"
	c.Endpoints[0].Address = "changed"
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"string"}`)
	c.Capabilities = c.Capabilities[1:]
	mustRegister(t, r, c)
	if err := r.Restore(c); err != nil {
		t.Fatal(err)
	}
	remote.Revision = 2
	remote.Capabilities[0].ID = "other"
	mustMerge(t, r, remote)
	clock.Advance(time.Second)
	mustMerge(t, r, remote) // equal revision: refreshes LastSeenAt only
	r.Unregister("venus")
	r.RemovePeer(nodes[1].id)
	r.Expire()
	for i := range shared {
		if !reflect.DeepEqual(shared[i], want[i]) {
			t.Fatalf("shared card %d changed:\n%+v\nwant\n%+v", i, shared[i], want[i])
		}
	}

	// Appends reallocate: two callers appending to their copies of one
	// stored card do not write over each other or over the registry.
	// A 17-byte schema, which a plain copy would give a capacity of 24.
	c = benchCard()
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"string"}`)
	mustRegister(t, r, c)
	x, _ := r.GetShared("venus")
	y, _ := r.GetShared("venus")
	xp, yp := append(x.Protocols, "x"), append(y.Protocols, "y")
	xe, ye := append(x.Endpoints, agentcard.Endpoint{Address: "x"}), append(y.Endpoints, agentcard.Endpoint{Address: "y"})
	xc, yc := append(x.Capabilities, agentcard.Capability{ID: "x"}), append(y.Capabilities, agentcard.Capability{ID: "y"})
	xs, ys := append(x.Capabilities[0].InputSchema, 'x'), append(y.Capabilities[0].InputSchema, 'y')
	if xp[len(xp)-1] != "x" || xe[len(xe)-1].Address != "x" || xc[len(xc)-1].ID != "x" || xs[len(xs)-1] != 'x' ||
		yp[len(yp)-1] != "y" || ye[len(ye)-1].Address != "y" || yc[len(yc)-1].ID != "y" || ys[len(ys)-1] != 'y' {
		t.Fatal("appends to shared slices overlap")
	}
	if again, _ := r.Get("venus"); !reflect.DeepEqual(again, x) {
		t.Fatal("appending to a shared card changed the registry")
	}
}

// TestSharedMatchesCopies checks that the *Shared methods find what their
// copying counterparts find, with the card's own address.
func TestSharedMatchesCopies(t *testing.T) {
	nodes := testNodes(t)
	self, a, b := nodes[0].id, nodes[1].id, nodes[2].id
	clock := newClock()
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(time.Minute))
	mustRegister(t, r, sampleCard("sun", "x"))
	mustRegister(t, r, sampleCard("mars", "y"))
	mustMerge(t, r, remoteCard("earth", a, 1, "x", "y"))
	mustMerge(t, r, remoteCard("mars", a, 1, "x"))
	mustMerge(t, r, remoteCard("io", b, 1, "z"))
	clock.Advance(30 * time.Second)
	mustMerge(t, r, remoteCard("io", a, 1, "w"))
	mustMerge(t, r, remoteCard("old", b, 1, "old"))
	clock.Advance(45 * time.Second) // expires io@b and, with it, capability z

	at := func(id string, p peer.ID) string { return id + "@" + p.String() }
	check := func(t *testing.T) {
		for _, addr := range []string{
			"sun", at("sun", self), "mars", at("mars", self), at("mars", a), "earth", at("earth", a),
			at("earth", b), "io", at("io", a), at("io", b), "old", at("old", b), "pluto", "", "bad@@", "@", "sun@",
			"sun@" + self.String() + "x",
		} {
			got, ok := r.Get(addr)
			shared, ok2 := r.GetShared(addr)
			shared2, sa, ok3 := r.GetSharedAddr(addr)
			if ok != ok2 || ok != ok3 || !reflect.DeepEqual(got, shared) || !reflect.DeepEqual(got, shared2) ||
				(ok && sa != got.Address()) || (!ok && sa != "") {
				t.Errorf("Get(%q) = %v %v, GetShared = %v %v, GetSharedAddr = %v %q %v",
					addr, got.Address(), ok, shared.Address(), ok2, shared2.Address(), sa, ok3)
			}
			res, err := r.Resolve(addr)
			rs, ra, err2 := r.ResolveShared(addr)
			if !reflect.DeepEqual(err, err2) || !reflect.DeepEqual(res, rs) || (err == nil && ra != res.Address()) {
				t.Errorf("Resolve(%q) = %v %v, ResolveShared = %v %q %v", addr, res.Address(), err, rs.Address(), ra, err2)
			}
		}
		for _, capID := range []string{"x", "y", "z", "w", "old", "none"} {
			all := r.FindByCapability(capID)
			c, ca, ok := r.FirstByCapabilityShared(capID)
			if ok != (len(all) > 0) || (ok && (!reflect.DeepEqual(c, all[0]) || ca != all[0].Address())) {
				t.Errorf("FirstByCapabilityShared(%q) = %v %q %v, FindByCapability = %v", capID, c.Address(), ca, ok, addresses(all))
			}
		}
	}
	t.Run("ttl", check)
	r.Expire()
	t.Run("expired", check)
	t.Run("empty-self", func(t *testing.T) {
		r = agentcard.NewRegistry("")
		mustRegister(t, r, sampleCard("sun", "x"))
		mustRegister(t, r, sampleCard("mars", "x"))
		mustMerge(t, r, remoteCard("mars", a, 1, "x"))
		check(t)
	})
}

// TestSharedUnderConcurrentWrites reads shared cards while their agents are
// registered and merged again with other data; run with -race, which
// reports any write to memory a shared card still uses.
func TestSharedUnderConcurrentWrites(t *testing.T) {
	nodes := testNodes(t)
	r := agentcard.NewRegistry(nodes[0].id)
	version := func(id string, i int, host peer.ID) agentcard.Card {
		c := sampleCard(id, fmt.Sprintf("c%d", i), "x")
		c.Description = fmt.Sprint(i)
		c.Protocols = []string{fmt.Sprint(i)}
		c.Capabilities[0].InputSchema = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		if host != "" {
			c.Host = host.String()
			c.Revision = uint64(i)
		}
		return c
	}
	// consistent reports whether every part of c says the same version.
	consistent := func(c agentcard.Card) bool {
		i := c.Description
		return c.Protocols[0] == i && c.Capabilities[0].ID == "c"+i && string(c.Capabilities[0].InputSchema) == `{"i":`+i+`}`
	}
	mustRegister(t, r, version("venus", 0, ""))
	mustMerge(t, r, version("mercury", 1, nodes[1].id))
	remote := "mercury@" + nodes[1].id.String()

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 300 {
			_, _ = r.Register(version("venus", i, ""))
			_, _ = r.MergeRemote(version("mercury", i+1, nodes[1].id))
			if i%50 == 0 {
				r.Unregister("venus")
				r.RemovePeer(nodes[1].id)
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			var held []agentcard.Card
			for range 300 {
				for _, get := range []func() (agentcard.Card, bool){
					func() (agentcard.Card, bool) { return r.GetShared("venus") },
					func() (agentcard.Card, bool) { c, _, ok := r.GetSharedAddr(remote); return c, ok },
					func() (agentcard.Card, bool) { c, _, err := r.ResolveShared("mercury"); return c, err == nil },
					func() (agentcard.Card, bool) { c, _, ok := r.FirstByCapabilityShared("x"); return c, ok },
				} {
					if c, ok := get(); ok {
						if !consistent(c) {
							t.Errorf("shared card %s is torn: %+v", c.ID, c)
							return
						}
						held = append(held, c)
					}
				}
			}
			for _, c := range held {
				if !consistent(c) {
					t.Errorf("shared card %s changed: %+v", c.ID, c)
					return
				}
			}
		})
	}
	wg.Wait()
}

// RetainPeer drops exactly the remote cards of that host that its roster
// leaves out: never another host's, never a local card.
func TestRetainPeer(t *testing.T) {
	nodes := testNodes(t)
	self, p, q := nodes[0].id, nodes[1].id, nodes[2].id
	r := agentcard.NewRegistry(self)
	mustRegister(t, r, sampleCard("carol"))
	for _, id := range []string{"alice", "bob", "carol"} {
		mustMerge(t, r, remoteCard(id, p, 1))
		mustMerge(t, r, remoteCard(id, q, 1))
	}
	gone := r.RetainPeer(p, []string{"bob"})
	want := []string{"alice@" + p.String(), "carol@" + p.String()}
	if !slices.Equal(gone, want) {
		t.Fatalf("RetainPeer removed %v, want %v", gone, want)
	}
	for _, a := range []string{"bob@" + p.String(), "alice@" + q.String(), "bob@" + q.String(), "carol@" + q.String(), "carol@" + self.String()} {
		if _, ok := r.Get(a); !ok {
			t.Errorf("%s removed", a)
		}
	}
	for _, a := range want {
		if _, ok := r.Get(a); ok {
			t.Errorf("%s kept", a)
		}
	}
	if gone := r.RetainPeer(self, nil); gone != nil || len(r.Local()) != 1 {
		t.Fatalf("RetainPeer(self) removed %v", gone)
	}
	if gone := r.RetainPeer(q, nil); len(gone) != 3 || len(r.Remote()) != 1 {
		t.Fatalf("an empty roster removed %v, %d remote cards left", gone, len(r.Remote()))
	}
}

// A card its host withdrew (RetainPeer) does not come back from a DHT
// record with an older heartbeat (MergeRemoteAt), which may linger for a
// TTL; a newer heartbeat, or the host presenting it again (MergeRemote),
// brings it back. Withdrawals are forgotten after a TTL.
func TestWithdrawnCardStaysWithdrawn(t *testing.T) {
	nodes := testNodes(t)
	self, p := nodes[0].id, nodes[1].id
	clock := newClock()
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now))
	carol := remoteCard("carol", p, 1)
	mustMerge(t, r, carol)
	published := clock.Now()
	clock.Advance(time.Second)
	if gone := r.RetainPeer(p, nil); len(gone) != 1 {
		t.Fatalf("RetainPeer removed %v", gone)
	}
	clock.Advance(time.Second)
	if changed, err := r.MergeRemoteAt(carol, published); err != nil || changed {
		t.Fatalf("a lingering record of a withdrawn card: changed %v, %v", changed, err)
	}
	if _, ok := r.Get(carol.Address()); ok {
		t.Fatal("a withdrawn card came back from a record older than its withdrawal")
	}
	if changed, err := r.MergeRemoteAt(carol, clock.Now()); err != nil || !changed {
		t.Fatalf("a heartbeat after the withdrawal: changed %v, %v", changed, err)
	}
	r.RetainPeer(p, nil)
	if changed, err := r.MergeRemote(carol); err != nil || !changed {
		t.Fatalf("the host presenting it again: changed %v, %v", changed, err)
	}
	if changed, _ := r.MergeRemoteAt(carol, published); changed {
		t.Fatal("a record older than the card held replaced it")
	}
	if _, ok := r.Get(carol.Address()); !ok {
		t.Fatal("the card presented again by its host left")
	}
	// Forgotten after a TTL: records that old are stale anyway.
	r.RetainPeer(p, nil)
	clock.Advance(agentcard.DefaultRemoteTTL + time.Second)
	r.Expire()
	if changed, err := r.MergeRemoteAt(carol, clock.Now()); err != nil || !changed {
		t.Fatalf("a fresh record a TTL after the withdrawal: changed %v, %v", changed, err)
	}
}
