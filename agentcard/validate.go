package agentcard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Limits enforced by [Card.Validate]. Lengths in characters count Unicode
// code points; every string must be valid UTF-8.
const (
	MaxNameLen        = 128  // characters, card and capability names
	MaxDescriptionLen = 4096 // characters, card and capability descriptions
	MaxSandboxIDLen   = 128  // bytes
	MaxProtocols      = 32   // entries in Protocols
	MaxProtocolLen    = 128  // bytes per protocol
	MaxAddressLen     = 2048 // bytes per endpoint address
	MaxVersionLen     = 64   // bytes
	MaxSchemaDepth    = 64   // nesting of objects and arrays in a schema

	// MaxCardSize is the largest card, as encoded JSON, that Validate
	// accepts. It leaves room below [MaxSignedCardSize] for the envelope's
	// public key, signature and framing, so every valid card can be sealed.
	MaxCardSize = MaxSignedCardSize - 4<<10
)

// The id rules of the mesh, whose one home is this package: every other
// package that checks an agent or capability id calls [ValidID],
// [ValidCapabilityID] or [CheckCapabilityID].
const (
	// IDPattern is the rule of an agent id (a card's id): letters, digits,
	// '_', '.' and '-', starting with a letter or digit, at most
	// [MaxIDLen] bytes. It has no '@', so "name@peerID" is unambiguous.
	IDPattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`
	// CapabilityIDPattern is the rule of a capability id: letters,
	// digits, '_', '.', ':', '/' and '-', starting with a letter or
	// digit, at most [MaxCapabilityIDLen] bytes.
	CapabilityIDPattern = `^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`

	MaxIDLen           = 64  // bytes of an agent id (IDPattern)
	MaxCapabilityIDLen = 128 // bytes of a capability id (CapabilityIDPattern)
)

// Validate checks c and returns nil or an [*InvalidCardError] listing every
// problem, in field order, named by JSON path:
//
//   - id: required, matching ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ (no '@', so
//     addresses are unambiguous);
//   - name: required, at most 128 characters;
//   - version: required, a semantic version (2.0.0): MAJOR.MINOR.PATCH,
//     optionally followed by a pre-release and build metadata
//     ("1.2.3-rc.1+abc"), at most 64 bytes;
//   - description: at most 4096 characters;
//   - tier: L0..L3;
//   - protocols: at most 32 entries, each non-empty and at most 128 bytes;
//   - endpoints[i].transport: "local", "libp2p" or "websocket";
//     endpoints[i].address at most 2048 bytes;
//   - capabilities: required, but may be empty: a nil slice (JSON null or
//     absent) is a missing field, an empty one is a card with no
//     capabilities; each capability id required, matching
//     ^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$ and unique within the card; name
//     at most 128 characters, description at most 4096; inputSchema and
//     outputSchema, when present, valid JSON nested at most 64 levels deep;
//   - sandboxId: at most 128 bytes;
//   - origin: "", "local" or "remote";
//   - host: empty, or a peer ID in its canonical string form;
//   - the whole card, as JSON, at most [MaxCardSize] bytes.
//
// All strings must be valid UTF-8, so that every valid card survives a JSON
// round trip unchanged.
func (c Card) Validate() error {
	if ps := c.problems(); len(ps) > 0 {
		return &InvalidCardError{Problems: ps}
	}
	return nil
}

func (c *Card) problems() []FieldProblem {
	var v checker

	switch {
	case c.ID == "":
		v.add("id", "required")
	case !ValidID(c.ID):
		v.add("id", "must match %s (got %s)", IDPattern, wirecodec.Quote(c.ID))
	}
	v.text("name", c.Name, true, MaxNameLen)
	switch {
	case c.Version == "":
		v.add("version", "required")
	case !validVersion(c.Version):
		v.add("version", "must be a semantic version MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] of at most %d bytes (got %s)",
			MaxVersionLen, wirecodec.Quote(c.Version))
	}
	v.text("description", c.Description, false, MaxDescriptionLen)
	if !c.Tier.Valid() {
		v.add("tier", "must be 0..3 (got %d)", uint8(c.Tier))
	}

	if len(c.Protocols) > MaxProtocols {
		v.add("protocols", "at most %d entries (got %d)", MaxProtocols, len(c.Protocols))
	}
	for i, p := range c.Protocols {
		f := "protocols[" + strconv.Itoa(i) + "]"
		switch {
		case p == "":
			v.add(f, "must not be empty")
		case len(p) > MaxProtocolLen:
			v.add(f, "at most %d bytes (got %d)", MaxProtocolLen, len(p))
		case !utf8.ValidString(p):
			v.add(f, "must be valid UTF-8")
		}
	}

	for i, e := range c.Endpoints {
		f := "endpoints[" + strconv.Itoa(i) + "]"
		switch e.Transport {
		case TransportLocal, TransportLibp2p, TransportWebSocket:
		case "":
			v.add(f+".transport", "required")
		default:
			v.add(f+".transport", "must be one of local, libp2p, websocket (got %s)", wirecodec.Quote(e.Transport))
		}
		switch {
		case len(e.Address) > MaxAddressLen:
			v.add(f+".address", "at most %d bytes (got %d)", MaxAddressLen, len(e.Address))
		case !utf8.ValidString(e.Address):
			v.add(f+".address", "must be valid UTF-8")
		}
	}

	schemasOK := true
	if c.Capabilities == nil {
		v.add("capabilities", "required (an empty list is allowed)")
	}
	seen := make(map[string]int, len(c.Capabilities))
	for i := range c.Capabilities {
		cp := &c.Capabilities[i]
		f := "capabilities[" + strconv.Itoa(i) + "]"
		switch {
		case cp.ID == "":
			v.add(f+".id", "required")
		case !ValidCapabilityID(cp.ID):
			v.add(f+".id", "must match %s (got %s)", CapabilityIDPattern, wirecodec.Quote(cp.ID))
		default:
			if j, dup := seen[cp.ID]; dup {
				v.add(f+".id", "duplicates capabilities[%d].id (%s)", j, wirecodec.Quote(cp.ID))
			} else {
				seen[cp.ID] = i
			}
		}
		v.text(f+".name", cp.Name, false, MaxNameLen)
		v.text(f+".description", cp.Description, false, MaxDescriptionLen)
		schemasOK = v.schema(f+".inputSchema", cp.InputSchema) && schemasOK
		schemasOK = v.schema(f+".outputSchema", cp.OutputSchema) && schemasOK
	}

	switch {
	case len(c.SandboxID) > MaxSandboxIDLen:
		v.add("sandboxId", "at most %d bytes (got %d)", MaxSandboxIDLen, len(c.SandboxID))
	case !utf8.ValidString(c.SandboxID):
		v.add("sandboxId", "must be valid UTF-8")
	}
	switch c.Origin {
	case "", OriginLocal, OriginRemote:
	default:
		v.add("origin", "must be local or remote (got %s)", wirecodec.Quote(string(c.Origin)))
	}
	if c.Host != "" {
		if id, err := decodePeer(c.Host); err != nil {
			v.add("host", "must be a peer ID (got %s): %v", wirecodec.Quote(c.Host), err)
		} else if s := id.String(); s != c.Host {
			v.add("host", "must be the canonical peer ID string %s (got %s)", wirecodec.Quote(s), wirecodec.Quote(c.Host))
		}
	}

	// The size is only measurable once the card encodes: an invalid tier or
	// schema makes encoding fail, and those are reported already.
	if c.Tier.Valid() && schemasOK {
		if n, err := encodedSize(c); err != nil {
			v.add("card", "cannot be encoded as JSON: %v", err)
		} else if n > MaxCardSize {
			v.add("card", "encoded JSON is %d bytes, more than %d", n, MaxCardSize)
		}
	}
	return v.problems
}

type checker struct{ problems []FieldProblem }

func (v *checker) add(field, format string, args ...any) {
	v.problems = append(v.problems, FieldProblem{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// text checks a human-readable string: required or not, valid UTF-8, and at
// most max characters.
func (v *checker) text(field, s string, required bool, max int) {
	switch {
	case s == "":
		if required {
			v.add(field, "required")
		}
	case !utf8.ValidString(s):
		v.add(field, "must be valid UTF-8")
	default:
		if n := utf8.RuneCountInString(s); n > max {
			v.add(field, "at most %d characters (got %d)", max, n)
		}
	}
}

// schema checks an optional JSON schema: valid JSON nested at most
// MaxSchemaDepth deep. It reports whether the schema can be encoded.
func (v *checker) schema(field string, s json.RawMessage) bool {
	switch {
	case len(s) == 0:
	case !json.Valid(s):
		v.add(field, "must be valid JSON")
		return false
	case wirecodec.JSONDepth(s) > MaxSchemaDepth:
		v.add(field, "nested more than %d levels deep", MaxSchemaDepth)
	}
	return true
}

// encodedSize is the length of c's JSON as [Seal] signs it.
func encodedSize(c *Card) (int, error) {
	b, err := marshalCard(c)
	return len(b), err
}

// marshalCard encodes c as compact JSON without HTML escaping, the form
// signed by [Seal].
func marshalCard(c *Card) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// MaxPeerIDLen bounds the text of a peer ID this package decodes. Real
// peer IDs are at most about 80 characters; go-libp2p's base58 decoder takes
// quadratic time, so a longer string is refused before decoding (a 64 KiB
// "host" would otherwise cost seconds of CPU per card).
const MaxPeerIDLen = 128

// decodePeer is peer.Decode for at most MaxPeerIDLen characters.
func decodePeer(s string) (peer.ID, error) {
	if len(s) > MaxPeerIDLen {
		return "", fmt.Errorf("peer ID of %d characters, more than %d", len(s), MaxPeerIDLen)
	}
	return peer.Decode(s)
}

// ValidID reports whether s is a valid agent id: whether it matches
// [IDPattern].
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '_' && b != '.' && b != '-' {
			return false
		}
	}
	return true
}

// ValidCapabilityID reports whether s is a valid capability id: whether
// it matches [CapabilityIDPattern].
func ValidCapabilityID(s string) bool {
	if len(s) == 0 || len(s) > MaxCapabilityIDLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '_' && b != '.' && b != ':' && b != '/' && b != '-' {
			return false
		}
	}
	return true
}

// CheckCapabilityID is [ValidCapabilityID] with the reason: nil for a
// valid capability id, else an error saying what is wrong (empty, too
// long, or the pattern), for callers that report it in their own typed
// error.
func CheckCapabilityID(id string) error {
	switch {
	case id == "":
		return errors.New("capability id must not be empty")
	case len(id) > MaxCapabilityIDLen:
		return fmt.Errorf("capability id is %d bytes, over the %d-byte limit", len(id), MaxCapabilityIDLen)
	case !ValidCapabilityID(id):
		return fmt.Errorf("capability id %s must match %s", wirecodec.Quote(id), CapabilityIDPattern)
	}
	return nil
}

// validVersion accepts semantic versions: MAJOR.MINOR.PATCH, numbers
// without leading zeros, then an optional "-" pre-release and "+" build,
// each a dot-separated list of non-empty [0-9A-Za-z-] identifiers.
func validVersion(s string) bool {
	if len(s) == 0 || len(s) > MaxVersionLen {
		return false
	}
	core, rest := s, ""
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		core, rest = s[:i], s[i:]
	}
	nums := strings.Split(core, ".")
	if len(nums) != 3 {
		return false
	}
	for _, n := range nums {
		if n == "" || (len(n) > 1 && n[0] == '0') {
			return false
		}
		for i := 0; i < len(n); i++ {
			if n[i] < '0' || n[i] > '9' {
				return false
			}
		}
	}
	if strings.HasPrefix(rest, "-") {
		pre := rest[1:]
		rest = ""
		if i := strings.IndexByte(pre, '+'); i >= 0 {
			pre, rest = pre[:i], pre[i:]
		}
		if !validIdentifiers(pre) {
			return false
		}
	}
	if strings.HasPrefix(rest, "+") {
		return validIdentifiers(rest[1:])
	}
	return rest == ""
}

func validIdentifiers(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			if b := part[i]; !isAlnum(b) && b != '-' {
				return false
			}
		}
	}
	return true
}
