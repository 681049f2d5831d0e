package agentcard

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/tiers"
)

// Origin says where a registry got a card from.
type Origin string

// The two origins. A card's origin is set by the registry that stores it:
// "local" for agents this node hosts, "remote" for cards merged from peers.
const (
	OriginLocal  Origin = "local"
	OriginRemote Origin = "remote"
)

// Transports an [Endpoint] may name.
const (
	TransportLocal     = "local"
	TransportLibp2p    = "libp2p"
	TransportWebSocket = "websocket"
)

// Endpoint is one way to reach an agent.
type Endpoint struct {
	Transport string `json:"transport"`         // "local", "libp2p" or "websocket"
	Address   string `json:"address,omitempty"` // a multiaddr or URL; empty for local
}

// Capability is one function an agent offers. InputSchema and OutputSchema
// are JSON Schemas kept verbatim; when present they must be valid JSON.
type Capability struct {
	ID           string          `json:"id"` // e.g. "codegen.react"
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// Card is an agent card: what an agent is, what it can do and how to reach
// it. The JSON field names are the seed's. A nil Capabilities slice means
// "missing" and fails validation; an empty non-nil slice is a valid card
// with no capabilities (JSON null versus []).
type Card struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	Description  string       `json:"description"`
	Tier         tiers.Tier   `json:"tier"`
	Protocols    []string     `json:"protocols"`
	Endpoints    []Endpoint   `json:"endpoints"`
	Capabilities []Capability `json:"capabilities"`
	Revision     uint64       `json:"revision"`
	SandboxID    string       `json:"sandboxId,omitempty"`
	Origin       Origin       `json:"origin"`
	LastSeenAt   int64        `json:"lastSeenAt"`     // unix ms
	Host         string       `json:"host,omitempty"` // peer ID of the hosting node

	// standing is set by an assessor (see Standing); nil means the card
	// stands on its claims. It never goes on the wire.
	standing *Standing
}

// Address returns the card's canonical address, "id@host", or "id" when
// Host is empty.
func (c Card) Address() string {
	if c.Host == "" {
		return c.ID
	}
	return c.ID + "@" + c.Host
}

// HasAddress reports whether addr is c.Address(), without building that
// string: routers compare addresses on every message.
func (c Card) HasAddress(addr string) bool {
	if c.Host == "" {
		return addr == c.ID
	}
	return len(addr) == len(c.ID)+1+len(c.Host) && addr[len(c.ID)] == '@' &&
		strings.HasPrefix(addr, c.ID) && strings.HasSuffix(addr, c.Host)
}

// HasCapability reports whether the card lists a capability with this id.
func (c Card) HasCapability(id string) bool {
	for i := range c.Capabilities {
		if c.Capabilities[i].ID == id {
			return true
		}
	}
	return false
}

// Clone returns a deep copy of c. Nil slices stay nil and empty ones stay
// empty.
func (c Card) Clone() Card {
	c.Protocols = slices.Clone(c.Protocols)
	c.Endpoints = slices.Clone(c.Endpoints)
	if c.Capabilities != nil {
		caps := make([]Capability, len(c.Capabilities))
		for i, cp := range c.Capabilities {
			cp.InputSchema = cloneRaw(cp.InputSchema)
			cp.OutputSchema = cloneRaw(cp.OutputSchema)
			caps[i] = cp
		}
		c.Capabilities = caps
	}
	return c
}

func cloneRaw(m json.RawMessage) json.RawMessage {
	if m == nil {
		return nil
	}
	return append(json.RawMessage{}, m...)
}

// Equal reports whether c and o are equivalent: every field equal, with
// schemas compared as JSON values (so formatting and escaping do not
// matter) and nil Protocols or Endpoints equal to empty ones. Capabilities
// are different: nil (missing) is not equal to empty.
func (c Card) Equal(o Card) bool {
	return c.Revision == o.Revision && c.Origin == o.Origin && c.LastSeenAt == o.LastSeenAt &&
		c.Host == o.Host && sameData(c, o)
}

// sameData compares what an agent says about itself: every field except
// Revision, LastSeenAt, Origin and Host, which the registry maintains.
func sameData(a, b Card) bool {
	if a.ID != b.ID || a.Name != b.Name || a.Version != b.Version || a.Description != b.Description ||
		a.Tier != b.Tier || a.SandboxID != b.SandboxID {
		return false
	}
	if !slices.Equal(a.Protocols, b.Protocols) || !slices.Equal(a.Endpoints, b.Endpoints) {
		return false
	}
	if (a.Capabilities == nil) != (b.Capabilities == nil) || len(a.Capabilities) != len(b.Capabilities) {
		return false
	}
	for i := range a.Capabilities {
		x, y := &a.Capabilities[i], &b.Capabilities[i]
		if x.ID != y.ID || x.Name != y.Name || x.Description != y.Description ||
			!jsonEqual(x.InputSchema, y.InputSchema) || !jsonEqual(x.OutputSchema, y.OutputSchema) {
			return false
		}
	}
	return true
}

// jsonEqual compares two raw JSON values as values. Numbers compare by their
// literal text, so 1 and 1.0 differ. Invalid JSON compares byte for byte.
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	va, okA := decodeValue(a)
	vb, okB := decodeValue(b)
	if !okA || !okB {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decodeValue(m json.RawMessage) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

// SplitAddress splits an agent address into the agent id and the hosting
// peer. "name" gives host ""; "name@<peerID>" decodes the peer ID (any form
// [peer.Decode] accepts). A bad id or peer ID is an [*AddressError].
func SplitAddress(addr string) (id string, host peer.ID, err error) {
	id, hostStr, qualified := strings.Cut(addr, "@")
	if id == "" {
		return "", "", &AddressError{Address: addr, Reason: "empty agent id"}
	}
	if !ValidID(id) {
		return "", "", &AddressError{Address: addr, Reason: "agent id must match " + IDPattern}
	}
	if !qualified {
		return id, "", nil
	}
	if hostStr == "" {
		return "", "", &AddressError{Address: addr, Reason: `empty peer ID after "@"`}
	}
	host, err = decodePeer(hostStr)
	if err != nil {
		return "", "", &AddressError{Address: addr, Reason: "bad peer ID: " + err.Error()}
	}
	return id, host, nil
}
