package agentcard_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/record"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// Property 1: for any valid card, registering it and querying by its
// identifier returns an equivalent card; querying by any of its
// capabilities includes it. (Requirements 1.1, 1.2, 1.3.)
func TestProperty1_RegisterAndRetrieve(t *testing.T) {
	self := testNodes(t)[0]
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		r := agentcard.NewRegistry(self.id, agentcard.WithClock(clock.Now))
		spec := cardSpec{hosts: []string{"", self.id.String()}, origins: []agentcard.Origin{"", agentcard.OriginLocal, agentcard.OriginRemote}}
		cards := rapid.SliceOfNDistinct(genCardWith(spec), 1, 5, func(c agentcard.Card) string { return c.ID }).Draw(t, "cards")

		for _, c := range cards {
			stored, err := r.Register(c)
			if err != nil {
				t.Fatalf("Register(%s): %v", c.ID, err)
			}
			want := c.Clone()
			want.Host = self.id.String()
			want.Origin = agentcard.OriginLocal
			want.LastSeenAt = clock.Now().UnixMilli()
			if !stored.Equal(want) {
				t.Fatalf("Register returned %+v, want %+v", stored, want)
			}
		}
		for _, c := range cards {
			want, _ := r.Get(c.ID)
			if !sameCardData(want, c) || want.Revision != c.Revision {
				t.Fatalf("Get(%q) = %+v, want the data of %+v", c.ID, want, c)
			}
			for _, addr := range []string{c.ID, c.ID + "@" + self.id.String()} {
				got, err := r.Resolve(addr)
				if err != nil {
					t.Fatalf("Resolve(%q): %v", addr, err)
				}
				if !got.Equal(want) {
					t.Fatalf("Resolve(%q) = %+v, want %+v", addr, got, want)
				}
				if got, ok := r.Get(addr); !ok || !got.Equal(want) {
					t.Fatalf("Get(%q) = %+v, %v", addr, got, ok)
				}
			}
			for _, cp := range c.Capabilities {
				found := r.FindByCapability(cp.ID)
				if !slices.ContainsFunc(found, func(f agentcard.Card) bool { return f.ID == c.ID }) {
					t.Fatalf("FindByCapability(%q) = %v, missing %s", cp.ID, addresses(found), c.ID)
				}
				for _, f := range found {
					if !f.HasCapability(cp.ID) {
						t.Fatalf("FindByCapability(%q) returned %s without it", cp.ID, f.ID)
					}
				}
			}
			if !slices.ContainsFunc(r.FindByTier(c.Tier), func(f agentcard.Card) bool { return f.ID == c.ID }) {
				t.Fatalf("FindByTier(%s) misses %s", c.Tier, c.ID)
			}
		}
		if n := len(r.Local()); n != len(cards) {
			t.Fatalf("Local() has %d cards, want %d", n, len(cards))
		}
		first, ok := r.FirstLocal()
		if want := slices.MinFunc(r.Local(), func(a, b agentcard.Card) int { return strings.Compare(a.ID, b.ID) }); !ok || !first.Equal(want) {
			t.Fatalf("FirstLocal() = %s, %v; want %s", first.ID, ok, want.ID)
		}
	})
}

// Property 2: for any card missing one or more of the required fields
// (identifier, name, version, tier, capabilities), registration is rejected
// with an error that names each missing field. (Requirement 1.4.)
func TestProperty2_ValidationRejectsIncompleteCards(t *testing.T) {
	self := testNodes(t)[0]
	fields := []string{"id", "name", "version", "tier", "capabilities"}
	rapid.Check(t, func(t *rapid.T) {
		c := genCard().Draw(t, "card")
		mask := rapid.IntRange(1, 1<<len(fields)-1).Draw(t, "dropped")
		var dropped []string
		for i, f := range fields {
			if mask&(1<<i) == 0 {
				continue
			}
			dropped = append(dropped, f)
			switch f {
			case "id":
				c.ID = ""
			case "name":
				c.Name = ""
			case "version":
				c.Version = ""
			case "tier":
				c.Tier = tiers.Tier(rapid.IntRange(4, 255).Draw(t, "badTier"))
			case "capabilities":
				c.Capabilities = nil
			}
		}

		err := c.Validate()
		var ice *agentcard.InvalidCardError
		if !errors.As(err, &ice) {
			t.Fatalf("Validate() = %v, want *InvalidCardError", err)
		}
		var got []string
		for _, p := range ice.Problems {
			got = append(got, p.Field)
		}
		if !slices.Equal(got, dropped) {
			t.Fatalf("problems on %v, want exactly %v (%v)", got, dropped, err)
		}
		for _, f := range dropped {
			if !containsField(err.Error(), f) {
				t.Fatalf("message %q does not name %s", err, f)
			}
		}

		r := agentcard.NewRegistry(self.id)
		if _, err := r.Register(c); !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Fatalf("Register() = %v, want ErrInvalidCard", err)
		}
		if n := len(r.List()); n != 0 {
			t.Fatalf("registry holds %d cards after a rejected registration", n)
		}
	})
}

// Property 2 through JSON input, as cards arrive (a peer's signed card, an
// API client): a card JSON without one or more of the required keys is
// rejected with INVALID_CARD naming each missing field, and a card whose
// "tier" key is missing, null or not a tier is rejected naming "tier",
// never read as L0 (the zero value). The same JSON signed by its host is
// refused by Open, the path of cards on the wire. With every key present,
// the card is accepted, so a decoder that refused everything would fail.
func TestProperty2_IncompleteCardJSONRejected(t *testing.T) {
	nodes := testNodes(t)
	signer := nodes[0]
	fields := []string{"id", "name", "version", "capabilities"} // tier apart: decoding refuses it
	rapid.Check(t, func(t *rapid.T) {
		c := genCardWith(cardSpec{hosts: []string{signer.id.String()}, origins: []agentcard.Origin{"", agentcard.OriginRemote}}).Draw(t, "card")
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		mask := rapid.IntRange(0, 1<<len(fields)-1).Draw(t, "dropped")
		var dropped []string
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				dropped = append(dropped, f)
				delete(obj, f)
			}
		}
		tierMode := rapid.SampledFrom([]string{"present", "missing", "null", "number", "name"}).Draw(t, "tier")
		switch tierMode {
		case "missing":
			delete(obj, "tier")
		case "null":
			obj["tier"] = json.RawMessage(`null`)
		case "number":
			obj["tier"] = json.RawMessage(strconv.Itoa(rapid.IntRange(4, 1000).Draw(t, "badTier")))
		case "name":
			obj["tier"], _ = json.Marshal(rapid.SampledFrom([]string{"L4", "L9", "", "L", "top", "L-1", "0.5"}).Draw(t, "badTierName"))
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}

		var got agentcard.Card
		err = json.Unmarshal(data, &got)
		if err == nil {
			err = got.Validate()
		}
		var want []string // the fields the error must name
		switch {
		case tierMode != "present":
			want = []string{"tier"}
		default:
			want = dropped
		}
		if len(want) == 0 {
			if err != nil {
				t.Fatalf("complete card %s refused: %v", data, err)
			}
			if !got.Equal(c) {
				t.Fatalf("decoded %+v, want %+v", got, c)
			}
		} else {
			var ice *agentcard.InvalidCardError
			if !errors.As(err, &ice) || !errors.Is(err, agentcard.ErrInvalidCard) {
				t.Fatalf("card %s: %v, want INVALID_CARD", data, err)
			}
			var problems []string
			for _, p := range ice.Problems {
				problems = append(problems, p.Field)
			}
			if !slices.Equal(problems, want) {
				t.Fatalf("card %s: problems on %v, want exactly %v (%v)", data, problems, want, err)
			}
			for _, f := range want {
				if !containsField(err.Error(), f) {
					t.Fatalf("message %q does not name %s", err, f)
				}
			}
		}

		env, err := record.Seal(&rawRecord{payload: data}, signer.key)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		opened, _, err := agentcard.Open(sealed)
		switch {
		case len(want) == 0 && (err != nil || !opened.Equal(c)):
			t.Fatalf("Open of the signed complete card: %+v, %v", opened, err)
		case len(want) > 0 && !errors.Is(err, agentcard.ErrInvalidCard):
			t.Fatalf("Open of signed %s = %+v, %v, want INVALID_CARD", data, opened, err)
		}
	})
}

// Property 3: a card registered twice with the same identifier but
// different data leaves one card with that identifier, holding the new
// data, with its revision incremented by one. Registering identical data
// again keeps the revision. (Requirement 1.5.)
func TestProperty3_DuplicateRegistrationIncrementsRevision(t *testing.T) {
	self := testNodes(t)[0]
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		r := agentcard.NewRegistry(self.id, agentcard.WithClock(clock.Now))
		first := genCard().Draw(t, "first")
		second := genCard().Draw(t, "second")
		second.ID = first.ID
		if sameCardData(first, second) {
			second.Description = first.Description + "!"
			if len(second.Description) > 4000 {
				second.Description = "changed"
			}
		}

		a, err := r.Register(first)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(1500 * time.Millisecond)
		b, err := r.Register(second)
		if err != nil {
			t.Fatal(err)
		}
		if b.Revision != a.Revision+1 {
			t.Fatalf("revision after an update = %d, want %d", b.Revision, a.Revision+1)
		}
		local := r.Local()
		if len(local) != 1 {
			t.Fatalf("Local() = %v, want one card", addresses(local))
		}
		if !sameCardData(local[0], second) || local[0].Revision != a.Revision+1 {
			t.Fatalf("stored %+v, want the data of %+v", local[0], second)
		}

		// The same data again (a restart): revision unchanged, whatever the
		// caller's revision says.
		again := second.Clone()
		again.Revision = rapid.Uint64Range(0, 1<<40).Draw(t, "callerRevision")
		c, err := r.Register(again)
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != b.Revision {
			t.Fatalf("re-registering identical data changed the revision %d -> %d", b.Revision, c.Revision)
		}
	})
}

// Property 4: any valid card survives JSON serialization and
// deserialization unchanged. (Requirement 1.6.)
func TestProperty4_CardJSONRoundTrip(t *testing.T) {
	hosts := append([]string{""}, peerStrings(testNodes(t))...)
	rapid.Check(t, func(t *rapid.T) {
		c := genCardWith(cardSpec{hosts: hosts, origins: []agentcard.Origin{"", agentcard.OriginLocal, agentcard.OriginRemote}}).Draw(t, "card")
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got agentcard.Card
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if !reflect.DeepEqual(got, c) || !got.Equal(c) {
			t.Fatalf("round trip changed the card:\n got %#v\nwant %#v", got, c)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("round-tripped card no longer validates: %v", err)
		}
		b2, err := json.Marshal(got)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("second encoding differs: %s vs %s (%v)", b2, b, err)
		}
	})
}

// Property 5: merging a card received from a remote source stores it with
// origin "remote" and every other field preserved (LastSeenAt records when
// it was merged). (Requirement 1.8.)
func TestProperty5_RemoteMergePreservesOrigin(t *testing.T) {
	nodes := testNodes(t)
	self := nodes[0]
	rapid.Check(t, func(t *rapid.T) {
		clock := newClock()
		r := agentcard.NewRegistry(self.id, agentcard.WithClock(clock.Now))
		c := genCardWith(cardSpec{
			hosts:   peerStrings(nodes[1:]),
			origins: []agentcard.Origin{"", agentcard.OriginLocal, agentcard.OriginRemote},
		}).Draw(t, "card")
		in := c.Clone()

		changed, err := r.MergeRemote(c)
		if err != nil || !changed {
			t.Fatalf("MergeRemote() = %v, %v; want true, nil", changed, err)
		}
		if !reflect.DeepEqual(c, in) {
			t.Fatalf("MergeRemote modified its argument")
		}
		want := c.Clone()
		want.Origin = agentcard.OriginRemote
		want.LastSeenAt = clock.Now().UnixMilli()

		got, ok := r.Get(c.Address())
		if !ok {
			t.Fatalf("Get(%q) found nothing", c.Address())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stored\n %#v\nwant\n %#v", got, want)
		}
		remote := r.Remote()
		if len(remote) != 1 || !reflect.DeepEqual(remote[0], want) {
			t.Fatalf("Remote() = %v", addresses(remote))
		}
		if len(r.Local()) != 0 {
			t.Fatalf("a remote card shows up as local")
		}
		// A bare name that exists only remotely resolves to it.
		if got, err := r.Resolve(c.ID); err != nil || !got.Equal(want) {
			t.Fatalf("Resolve(%q) = %v, %v", c.ID, got.Address(), err)
		}
	})
}

// sameCardData compares two cards ignoring the fields the registry
// maintains (Revision, LastSeenAt, Origin, Host).
func sameCardData(a, b agentcard.Card) bool {
	a.Revision, a.LastSeenAt, a.Origin, a.Host = 0, 0, "", ""
	b.Revision, b.LastSeenAt, b.Origin, b.Host = 0, 0, "", ""
	return a.Equal(b)
}

func addresses(cs []agentcard.Card) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Address()
	}
	return out
}

func containsField(msg, field string) bool { return strings.Contains(msg, field+":") }
