package tiers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Tier is an agent's level in the planetary hierarchy, L0 (the orchestrator)
// to L3 (specialists). The zero value is L0. Values above L3 are invalid;
// [Tier.Valid] reports which.
type Tier uint8

// The four tiers, in order of authority.
const (
	L0 Tier = iota // orchestrator (sun)
	L1             // strategic (mercury, earth, jupiter)
	L2             // operational (venus, mars, pluto, saturn, titan)
	L3             // specialist (the other twelve planetary agents)
)

// Valid reports whether t is one of L0, L1, L2 and L3.
func (t Tier) Valid() bool { return t <= L3 }

// String returns "L0".."L3", or "L?(n)" for an invalid tier n.
func (t Tier) String() string {
	if !t.Valid() {
		return "L?(" + strconv.Itoa(int(t)) + ")"
	}
	return "L" + strconv.Itoa(int(t))
}

// ParseTier parses a tier written as "L2", "l2" or "2", ignoring surrounding
// white space.
func ParseTier(s string) (Tier, error) {
	v := strings.TrimSpace(s)
	if len(v) == 2 && (v[0] == 'L' || v[0] == 'l') {
		v = v[1:]
	}
	if len(v) == 1 && v[0] >= '0' && v[0] <= '3' {
		return Tier(v[0] - '0'), nil
	}
	return 0, fmt.Errorf("tiers: invalid tier %q: want L0, L1, L2 or L3", s)
}

// MarshalText returns "L0".."L3". It fails for an invalid tier, so that no
// configuration is written that cannot be read back.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("tiers: cannot marshal invalid tier %s", t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText accepts any form [ParseTier] accepts.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalJSON returns the tier as a JSON number 0..3, the seed's AgentTier
// encoding. It fails for an invalid tier.
func (t Tier) MarshalJSON() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("tiers: cannot marshal invalid tier %s", t)
	}
	return []byte{'0' + byte(t)}, nil
}

// UnmarshalJSON accepts a JSON number 0..3 or a JSON string in any form
// [ParseTier] accepts. As encoding/json recommends, null leaves t unchanged.
func (t *Tier) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, " \t\r\n") // JSON's white space; encoding/json passes none
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("tiers: invalid tier %s: %w", b, err)
		}
		return t.UnmarshalText([]byte(s))
	case len(b) == 1 && b[0] >= '0' && b[0] <= '3':
		*t = Tier(b[0] - '0')
		return nil
	}
	return fmt.Errorf("tiers: invalid tier %s: want a number 0..3 or a string L0..L3", truncate(b))
}

// truncate keeps error messages short when a decoder is fed a huge value.
func truncate(b []byte) string {
	const limit = 32
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
