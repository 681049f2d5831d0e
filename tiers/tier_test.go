package tiers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/tiers"
)

func TestTierString(t *testing.T) {
	for _, tc := range []struct {
		tier  tiers.Tier
		want  string
		valid bool
	}{
		{tiers.L0, "L0", true},
		{tiers.L1, "L1", true},
		{tiers.L2, "L2", true},
		{tiers.L3, "L3", true},
		{4, "L?(4)", false},
		{7, "L?(7)", false},
		{255, "L?(255)", false},
	} {
		if got := tc.tier.String(); got != tc.want {
			t.Errorf("Tier(%d).String() = %q, want %q", uint8(tc.tier), got, tc.want)
		}
		if got := tc.tier.Valid(); got != tc.valid {
			t.Errorf("Tier(%d).Valid() = %v, want %v", uint8(tc.tier), got, tc.valid)
		}
	}
}

func TestParseTier(t *testing.T) {
	accepted := map[string]tiers.Tier{
		"L0": tiers.L0, "L1": tiers.L1, "L2": tiers.L2, "L3": tiers.L3,
		"l0": tiers.L0, "l1": tiers.L1, "l2": tiers.L2, "l3": tiers.L3,
		"0": tiers.L0, "1": tiers.L1, "2": tiers.L2, "3": tiers.L3,
		" L2 ": tiers.L2, "\t3\n": tiers.L3, " l1": tiers.L1,
	}
	for in, want := range accepted {
		got, err := tiers.ParseTier(in)
		if err != nil || got != want {
			t.Errorf("ParseTier(%q) = %v, %v; want %v, nil", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", " ", "L", "l", "L4", "4", "-1", "L-1", "LL2", "L 2", "L22", "02", "2.0",
		"0x2", "L?(7)", "M2", "two", "L２", "\x00", "L\x002",
	} {
		got, err := tiers.ParseTier(in)
		if err == nil {
			t.Errorf("ParseTier(%q) = %v, nil; want an error", in, got)
			continue
		}
		if !strings.HasPrefix(err.Error(), "tiers: ") {
			t.Errorf("ParseTier(%q) error %q lacks the package prefix", in, err)
		}
	}
}

func TestTierTextRoundTrip(t *testing.T) {
	for _, tier := range []tiers.Tier{tiers.L0, tiers.L1, tiers.L2, tiers.L3} {
		b, err := tier.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", tier, err)
		}
		if string(b) != tier.String() {
			t.Errorf("%v.MarshalText = %q, want %q", tier, b, tier.String())
		}
		var back tiers.Tier = 99
		if err := back.UnmarshalText(b); err != nil || back != tier {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, tier)
		}
	}
	if b, err := tiers.Tier(4).MarshalText(); err == nil {
		t.Errorf("Tier(4).MarshalText = %q, nil; want an error", b)
	}
	var tier tiers.Tier = tiers.L2
	if err := tier.UnmarshalText([]byte("L9")); err == nil {
		t.Error("UnmarshalText(L9) succeeded")
	}
	if tier != tiers.L2 {
		t.Errorf("a failed UnmarshalText changed the tier to %v", tier)
	}
}

func TestTierJSON(t *testing.T) {
	// Tiers are JSON numbers, as in the seed's AgentCard (tier: 0 | 1 | 2 | 3);
	// as map keys encoding/json uses MarshalText.
	type card struct {
		Tier    tiers.Tier            `json:"tier"`
		Allowed []tiers.Tier          `json:"allowed"`
		ByTier  map[tiers.Tier]string `json:"byTier"`
	}
	in := card{
		Tier:    tiers.L2,
		Allowed: []tiers.Tier{tiers.L0, tiers.L3},
		ByTier:  map[tiers.Tier]string{tiers.L1: "mercury"},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"tier":2,"allowed":[0,3],"byTier":{"L1":"mercury"}}`
	if string(b) != want {
		t.Errorf("json.Marshal = %s, want %s", b, want)
	}
	var out card
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Tier != in.Tier || len(out.Allowed) != 2 || out.Allowed[0] != tiers.L0 ||
		out.Allowed[1] != tiers.L3 || out.ByTier[tiers.L1] != "mercury" {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}

	if _, err := json.Marshal(tiers.Tier(4)); err == nil {
		t.Error("json.Marshal(Tier(4)) succeeded")
	}

	accepted := map[string]tiers.Tier{
		`0`: tiers.L0, `1`: tiers.L1, `2`: tiers.L2, `3`: tiers.L3,
		`"L2"`: tiers.L2, `"l3"`: tiers.L3, `"1"`: tiers.L1, `" L0 "`: tiers.L0, `"\u004c2"`: tiers.L2,
	}
	for in, want := range accepted {
		var got tiers.Tier = 99
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{
		`4`, `-1`, `1.0`, `2e0`, `10`, `true`, `"L4"`, `""`, `[]`, `{}`, `"2`, ``, `nul`,
	} {
		got := tiers.L1
		err := got.UnmarshalJSON([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalJSON(%s) = %v, nil; want an error", in, got)
		}
	}
	// null leaves the value unchanged, as encoding/json recommends.
	got := tiers.L3
	if err := json.Unmarshal([]byte(`null`), &got); err != nil || got != tiers.L3 {
		t.Errorf("json.Unmarshal(null) = %v, %v; want L3 unchanged", got, err)
	}
}
