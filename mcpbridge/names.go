package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/nova-node/nova-node/agentcard"
)

// Naming rules.
//
//   - An agent name matches ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$: the agent id
//     rule (agentcard.IDPattern, checked by agentcard.ValidID) without '.',
//     since the first '.' of a canonical name separates the agent from the
//     tool. An agent whose id contains '.' cannot publish tools or prompts
//     through the bridge (registration fails with INVALID_NAME).
//   - A tool (or prompt) name matches ^[A-Za-z0-9_.-]{1,128}$: the tool-name
//     rule of MCP spec 2025-11-25, so that any conforming backend's tools can
//     be published unchanged. It may contain '.'.
//   - A canonical name is agent + "." + tool and is split at its first '.'.
//   - A wire name matches ^[A-Za-z0-9_-]{1,64}$ ([WireNamePattern]).
var (
	toolRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	wireRe = regexp.MustCompile(WireNamePattern)
)

// WireNamePattern is the tool-name rule of strict MCP clients.
const WireNamePattern = `^[A-Za-z0-9_-]{1,64}$`

// MaxWireNameLen is the longest wire name.
const MaxWireNameLen = 64

// ValidAgentName reports whether agent may publish tools and prompts: a
// valid agent id (agentcard.ValidID) without '.'.
func ValidAgentName(agent string) bool {
	return agentcard.ValidID(agent) && !strings.Contains(agent, ".")
}

// ValidToolName reports whether tool is an acceptable tool or prompt name.
func ValidToolName(tool string) bool { return toolRe.MatchString(tool) }

// ValidWireName reports whether name is legal for strict MCP clients.
func ValidWireName(name string) bool { return wireRe.MatchString(name) }

func checkAgent(agent string) error {
	if !ValidAgentName(agent) {
		return &NameError{Kind: "agent", Name: agent, Reason: "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}
	}
	return nil
}

func checkTool(kind, tool string) error {
	if !toolRe.MatchString(tool) {
		return &NameError{Kind: kind, Name: tool, Reason: "must match ^[A-Za-z0-9_.-]{1,128}$"}
	}
	return nil
}

// Canonical returns the mesh name "agent.tool" after checking both parts.
// Errors are *[NameError] (INVALID_NAME).
func Canonical(agent, tool string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	if err := checkTool("tool", tool); err != nil {
		return "", err
	}
	return agent + "." + tool, nil
}

// SplitCanonical splits a canonical name at its first '.' and checks both
// parts, so that SplitCanonical(Canonical(a, t)) == a, t.
func SplitCanonical(name string) (agent, tool string, err error) {
	i := strings.IndexByte(name, '.')
	if i < 0 {
		return "", "", &NameError{Kind: "canonical name", Name: name, Reason: `must have the form "agent.tool"`}
	}
	agent, tool = name[:i], name[i+1:]
	if err := checkAgent(agent); err != nil {
		return "", "", err
	}
	if err := checkTool("tool", tool); err != nil {
		return "", "", err
	}
	return agent, tool, nil
}

// sanitize maps every byte outside [A-Za-z0-9_-] to '_'.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// hashLen is the number of hex digits of the disambiguating suffix.
const hashLen = 8

func hashSuffix(agent, tool string, n int) string {
	h := sha256.New()
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	if n > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(n)))
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLen]
}

// WireName returns a name for the tool of agent that is legal for strict MCP
// clients (it always matches [WireNamePattern]) and for which taken reports
// false (a nil taken means nothing is taken). It accepts any input, valid
// or not.
//
// The plain form is sanitize(agent) + "_" + sanitize(tool), where sanitize
// maps every character outside [A-Za-z0-9_-] (such as '.') to '_'. When the
// plain form is longer than 64 bytes or taken (two pairs sanitizing to the
// same name, such as "a_b"+"c" and "a"+"b_c"), the result is the plain form
// cut to 55 bytes followed by "-" and 8 hex digits of SHA-256 over agent,
// tool (and, if that too is taken, a counter). The result depends only on
// the inputs and on taken, so it is stable for a given registration order.
func WireName(agent, tool string, taken func(string) bool) string {
	isTaken := func(s string) bool { return taken != nil && taken(s) }
	plain := sanitize(agent) + "_" + sanitize(tool)
	if len(plain) <= MaxWireNameLen && !isTaken(plain) {
		return plain
	}
	prefix := plain
	if len(prefix) > MaxWireNameLen-hashLen-1 {
		prefix = prefix[:MaxWireNameLen-hashLen-1]
	}
	for n := 0; ; n++ {
		name := prefix + "-" + hashSuffix(agent, tool, n)
		if !isTaken(name) {
			return name
		}
	}
}

// WireNames is a two-way table between canonical names and wire names. It
// is safe for concurrent use. Once assigned, a canonical name keeps its wire
// name until it is removed; no two canonical names share a wire name.
type WireNames struct {
	mu          sync.RWMutex
	toWire      map[string]string
	toCanonical map[string]string
}

// NewWireNames returns an empty table.
func NewWireNames() *WireNames {
	return &WireNames{toWire: map[string]string{}, toCanonical: map[string]string{}}
}

// Assign returns the wire name of agent.tool, assigning one with [WireName]
// if it has none yet. It fails only if agent or tool is invalid.
func (w *WireNames) Assign(agent, tool string) (string, error) {
	canon, err := Canonical(agent, tool)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if wire, ok := w.toWire[canon]; ok {
		return wire, nil
	}
	wire := WireName(agent, tool, func(s string) bool { _, ok := w.toCanonical[s]; return ok })
	w.toWire[canon] = wire
	w.toCanonical[wire] = canon
	return wire, nil
}

// Wire returns the wire name of a canonical name.
func (w *WireNames) Wire(canonical string) (string, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.toWire[canonical]
	return s, ok
}

// Canonical returns the canonical name behind a wire name.
func (w *WireNames) Canonical(wire string) (string, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.toCanonical[wire]
	return s, ok
}

// Remove forgets a canonical name and frees its wire name.
func (w *WireNames) Remove(canonical string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wire, ok := w.toWire[canonical]; ok {
		delete(w.toWire, canonical)
		delete(w.toCanonical, wire)
	}
}

// Len returns the number of entries.
func (w *WireNames) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.toWire)
}
