package tiers

import "strings"

// DefaultAssignments is the seed's DEFAULT_TIER_ASSIGNMENTS: the default tier
// of each of the 21 planetary agents (requirement 11.1), keyed by lower-case
// agent id. It is a data table; do not modify it at run time. Look agents up
// with [DefaultTier], which ignores case.
var DefaultAssignments = map[string]Tier{
	"sun": L0, // orchestrator

	"mercury": L1, // strategic
	"earth":   L1,
	"jupiter": L1,

	"venus":  L2, // operational
	"mars":   L2,
	"pluto":  L2,
	"saturn": L2,
	"titan":  L2,

	"enceladus": L3, // specialist
	"ganymede":  L3,
	"neptune":   L3,
	"charon":    L3,
	"uranus":    L3,
	"europa":    L3,
	"mimas":     L3,
	"io":        L3,
	"triton":    L3,
	"callisto":  L3,
	"atlas":     L3,
	"andromeda": L3,
}

// DefaultTier returns the default tier of the planetary agent agentID, ignoring
// case ("SUN" and "sun" are both L0). It reports false for any other id.
func DefaultTier(agentID string) (Tier, bool) {
	t, ok := DefaultAssignments[strings.ToLower(agentID)]
	return t, ok
}
