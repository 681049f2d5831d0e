package tiers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/tiers"
)

// FuzzParseTier feeds arbitrary text to ParseTier, UnmarshalText and
// UnmarshalJSON: none may panic, all accepted values are valid tiers, and
// every accepted value round-trips through String, MarshalText and
// MarshalJSON.
func FuzzParseTier(f *testing.F) {
	for _, s := range []string{
		"L0", "l1", "2", " L3 ", "\tl2\n", "L4", "", "L", "LL2", "-1", "255",
		`"L2"`, `3`, `null`, `"\u004c1"`, "L?(7)", "02", "２",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tier, err := tiers.ParseTier(s)
		if err == nil {
			if !tier.Valid() {
				t.Fatalf("ParseTier(%q) = invalid tier %d", s, tier)
			}
			norm := strings.ToUpper(strings.TrimSpace(s))
			if norm != tier.String() && "L"+norm != tier.String() {
				t.Fatalf("ParseTier(%q) = %v: accepted an unexpected form", s, tier)
			}
			roundTrip(t, tier)
		} else if !strings.HasPrefix(err.Error(), "tiers: ") {
			t.Fatalf("ParseTier(%q) error %q lacks the package prefix", s, err)
		}

		var viaText tiers.Tier
		if textErr := viaText.UnmarshalText([]byte(s)); (textErr == nil) != (err == nil) || viaText != tier {
			t.Fatalf("UnmarshalText(%q) = %v, %v; ParseTier = %v, %v", s, viaText, textErr, tier, err)
		}

		var viaJSON tiers.Tier = 99
		if jsonErr := viaJSON.UnmarshalJSON([]byte(s)); jsonErr == nil && viaJSON != 99 {
			if !viaJSON.Valid() {
				t.Fatalf("UnmarshalJSON(%q) = invalid tier %d", s, viaJSON)
			}
			if !json.Valid([]byte(s)) {
				t.Fatalf("UnmarshalJSON accepted invalid JSON %q", s)
			}
			roundTrip(t, viaJSON)
		}
	})
}

func roundTrip(t *testing.T, tier tiers.Tier) {
	t.Helper()
	if back, err := tiers.ParseTier(tier.String()); err != nil || back != tier {
		t.Fatalf("ParseTier(%q) = %v, %v", tier.String(), back, err)
	}
	text, err := tier.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var fromText tiers.Tier
	if err := fromText.UnmarshalText(text); err != nil || fromText != tier {
		t.Fatalf("text round trip of %v via %q = %v, %v", tier, text, fromText, err)
	}
	js, err := json.Marshal(tier)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON tiers.Tier
	if err := json.Unmarshal(js, &fromJSON); err != nil || fromJSON != tier {
		t.Fatalf("JSON round trip of %v via %s = %v, %v", tier, js, fromJSON, err)
	}
}
