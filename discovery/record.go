package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/agentcard"
)

// IndexKeyPrefix starts the DHT key of a node's signed agent index:
// "/nova/index/<peerID>".
const IndexKeyPrefix = "/nova/index/"

// IndexDomain is the libp2p signature domain of agent indexes, distinct
// from agentcard.PayloadDomain so neither signature can be replayed as the
// other.
const IndexDomain = "nova-agentindex"

// indexPayloadType is the envelope payload type of agent indexes.
const indexPayloadType = "/nova/agentindex/1"

// Limits of an agent index, checked before and while parsing.
const (
	MaxIndexSize   = 256 << 10 // bytes of the signed envelope and of its payload
	MaxIndexAgents = 1024
	// MaxIndexAuth and MaxIndexAuthRecord bound the swarm authority's
	// records an index carries (the admin log and the host's own grants):
	// opaque here, checked by whoever [WithAuthority] hands them to.
	MaxIndexAuth       = 64
	MaxIndexAuthRecord = 8 << 10
	maxIndexAuthBytes  = 128 << 10 // all of them, as published
	maxIndexCaps       = 256       // capability ids per agent
	maxCapIDLen        = 128
)

// Index is a node's signed list of the agents it hosts, with a heartbeat:
// the node re-signs it on every republish, so LastSeenAt says when the node
// was last alive. Capabilities are a hint telling a capability lookup which
// cards to read; the cards themselves are authoritative.
type Index struct {
	Host       peer.ID
	LastSeenAt int64 // unix ms
	Agents     []IndexEntry
	// Auth holds records of the swarm's authority that the host presents
	// beside its cards (see [WithAuthority]).
	Auth [][]byte
}

// IndexEntry is one hosted agent: its id, its card's current revision and
// its capability ids.
type IndexEntry struct {
	ID           string   `json:"id"`
	Revision     uint64   `json:"revision"`
	Capabilities []string `json:"capabilities"`
}

// Entry returns the entry of agent id, if the index lists it.
func (ix Index) Entry(id string) (IndexEntry, bool) {
	for _, e := range ix.Agents {
		if e.ID == id {
			return e, true
		}
	}
	return IndexEntry{}, false
}

type indexJSON struct {
	Host       string       `json:"host"`
	LastSeenAt int64        `json:"lastSeenAt"`
	Agents     []IndexEntry `json:"agents"`
	Auth       [][]byte     `json:"auth,omitempty"`
}

// IndexKey returns the DHT key of host's agent index.
func IndexKey(host peer.ID) string { return IndexKeyPrefix + host.String() }

// ParseIndexKey returns the host named by an index key.
func ParseIndexKey(key string) (peer.ID, error) {
	rest, ok := strings.CutPrefix(key, IndexKeyPrefix)
	if !ok {
		return "", badRecord("key", "%.80q does not start with %q", key, IndexKeyPrefix)
	}
	p, err := decodePeer(rest)
	if err != nil {
		return "", badRecord("key", "%.80q has a bad peer ID: %v", key, err)
	}
	return p, nil
}

// indexRecord is the index as a libp2p record.Record.
type indexRecord struct{ payload []byte }

func (*indexRecord) Domain() string                   { return IndexDomain }
func (*indexRecord) Codec() []byte                    { return []byte(indexPayloadType) }
func (r *indexRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *indexRecord) UnmarshalRecord(b []byte) error {
	r.payload = b
	return nil
}

// SealIndex signs ix with the node's key and returns the marshalled
// envelope. ix.Host is set to the key's peer ID; any other host is an
// error, as is an index that [OpenIndex] would refuse.
func SealIndex(ix Index, key crypto.PrivKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("discovery: seal index: nil private key")
	}
	signer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("discovery: seal index: %w", err)
	}
	if ix.Host != "" && ix.Host != signer {
		return nil, badRecord("index.host", "names %s but the signing key is %s", ix.Host, signer)
	}
	ix.Host = signer
	if err := checkIndex(&ix); err != nil {
		return nil, err
	}
	agents := ix.Agents
	if agents == nil {
		agents = []IndexEntry{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(indexJSON{Host: signer.String(), LastSeenAt: ix.LastSeenAt, Agents: agents, Auth: ix.Auth}); err != nil {
		return nil, fmt.Errorf("discovery: seal index: %w", err)
	}
	env, err := record.Seal(&indexRecord{payload: bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})}, key)
	if err != nil {
		return nil, fmt.Errorf("discovery: seal index: %w", err)
	}
	data, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("discovery: seal index: %w", err)
	}
	if len(data) > MaxIndexSize {
		return nil, badRecord("index", "signed index is %d bytes, more than %d", len(data), MaxIndexSize)
	}
	return data, nil
}

// OpenIndex verifies and decodes a signed agent index: at most
// [MaxIndexSize] bytes (checked first), a signature that verifies for
// [IndexDomain], our payload type, a payload that decodes strictly (no
// unknown fields, no trailing data) and passes the index rules, and a host
// that is the signer. Every rejection matches agentcard.ErrInvalidCard.
func OpenIndex(data []byte) (Index, error) { return openIndex(data, true) }

// openServedIndex decodes data, the index host itself served on
// [RecordsProtocol], with every check of [OpenIndex] but the signature's:
// the envelope's key and the index's host must be host. The secure
// connection the index came on proves who sent it, which is all the
// signature would prove to this node; the index is never passed on to
// another node. See "Lookups" in the package doc.
func openServedIndex(host peer.ID, data []byte) (Index, error) {
	ix, err := openIndex(data, false)
	if err == nil && ix.Host != host {
		err = badRecord("index.host", "index of %s served by %s", ix.Host, host)
	}
	return ix, err
}

// openIndex is [OpenIndex], checking the signature only when verify is
// set.
func openIndex(data []byte, verify bool) (Index, error) {
	if len(data) > MaxIndexSize {
		return Index{}, badRecord("index", "is %d bytes, more than %d", len(data), MaxIndexSize)
	}
	var env *record.Envelope
	var err error
	if verify {
		env, err = record.ConsumeTypedEnvelope(data, &indexRecord{})
	} else {
		env, err = record.UnmarshalEnvelope(data)
	}
	if err != nil && verify {
		return Index{}, badRecord("index.signature", "does not verify: %v", err)
	}
	if err != nil {
		return Index{}, badRecord("index", "does not decode: %v", err)
	}
	if string(env.PayloadType) != indexPayloadType {
		return Index{}, badRecord("index.payloadType", "is %.40q, want %q", env.PayloadType, indexPayloadType)
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return Index{}, badRecord("index.signature", "unusable public key: %v", err)
	}
	ix, err := decodeIndex(env.RawPayload)
	if err != nil {
		return Index{}, err
	}
	if ix.Host != signer {
		return Index{}, badRecord("index.host", "names %s but the index is signed by %s", ix.Host, signer)
	}
	return ix, nil
}

func decodeIndex(payload []byte) (Index, error) {
	if len(payload) > MaxIndexSize {
		return Index{}, badRecord("index", "payload is %d bytes, more than %d", len(payload), MaxIndexSize)
	}
	if t := bytes.TrimLeft(payload, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Index{}, badRecord("index", "must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var w indexJSON
	if err := dec.Decode(&w); err != nil {
		return Index{}, badRecord("index", "malformed: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Index{}, badRecord("index", "trailing data after the JSON object")
	}
	host, err := decodePeer(w.Host)
	if err != nil {
		return Index{}, badRecord("index.host", "bad peer ID %.80q: %v", w.Host, err)
	}
	ix := Index{Host: host, LastSeenAt: w.LastSeenAt, Agents: w.Agents, Auth: w.Auth}
	if err := checkIndex(&ix); err != nil {
		return Index{}, err
	}
	return ix, nil
}

// checkIndex applies the index rules: at most MaxIndexAgents agents, valid
// and distinct agent ids, at most maxIndexCaps capability ids of 1..128
// bytes each, a heartbeat that is not negative.
func checkIndex(ix *Index) error {
	if ix.LastSeenAt < 0 {
		return badRecord("index.lastSeenAt", "is negative")
	}
	if len(ix.Agents) > MaxIndexAgents {
		return badRecord("index.agents", "has %d entries, more than %d", len(ix.Agents), MaxIndexAgents)
	}
	seen := make(map[string]bool, len(ix.Agents))
	for i, e := range ix.Agents {
		if _, _, err := agentcard.SplitAddress(e.ID); err != nil || strings.Contains(e.ID, "@") {
			return badRecord(fmt.Sprintf("index.agents[%d].id", i), "%.80q is not an agent id", e.ID)
		}
		if seen[e.ID] {
			return badRecord(fmt.Sprintf("index.agents[%d].id", i), "duplicate %q", e.ID)
		}
		seen[e.ID] = true
		if len(e.Capabilities) > maxIndexCaps {
			return badRecord(fmt.Sprintf("index.agents[%d].capabilities", i), "has %d entries, more than %d", len(e.Capabilities), maxIndexCaps)
		}
		for j, c := range e.Capabilities {
			if c == "" || len(c) > maxCapIDLen {
				return badRecord(fmt.Sprintf("index.agents[%d].capabilities[%d]", i, j), "must be 1 to %d bytes", maxCapIDLen)
			}
		}
	}
	if len(ix.Auth) > MaxIndexAuth {
		return badRecord("index.auth", "has %d records, more than %d", len(ix.Auth), MaxIndexAuth)
	}
	for i, r := range ix.Auth {
		if len(r) == 0 || len(r) > MaxIndexAuthRecord {
			return badRecord(fmt.Sprintf("index.auth[%d]", i), "must be 1 to %d bytes", MaxIndexAuthRecord)
		}
	}
	return nil
}

// decodePeer is peer.Decode for at most agentcard.MaxPeerIDLen characters:
// go-libp2p's base58 decoding takes quadratic time, and keys and index
// hosts come from the network.
func decodePeer(s string) (peer.ID, error) {
	if len(s) > agentcard.MaxPeerIDLen {
		return "", fmt.Errorf("peer ID of %d characters, more than %d", len(s), agentcard.MaxPeerIDLen)
	}
	return peer.Decode(s)
}

func badRecord(field, format string, args ...any) error {
	return &agentcard.InvalidCardError{Problems: []agentcard.FieldProblem{{Field: field, Reason: fmt.Sprintf(format, args...)}}}
}

// Validator is the DHT validator of the "nova" namespace ([Namespace]). It
// accepts two kinds of records, each a libp2p signed envelope whose signer
// must be the peer named in the key:
//
//   - "/nova/card/<peerID>/<agent>": a signed card, checked by
//     agentcard.Validator (signature, host = signer = key's peer, id = key's
//     agent); Select picks the highest revision, then the latest heartbeat.
//   - "/nova/index/<peerID>": the peer's signed agent index ([OpenIndex]);
//     Select picks the latest heartbeat.
//
// Ties go to the greatest bytes, then the lowest index, so Select is
// stable. Any other key is refused. The zero value is ready to use.
type Validator struct{}

// Validate accepts value under key when it is a valid record of the key's
// kind, signed by the key's peer.
func (Validator) Validate(key string, value []byte) error {
	switch {
	case strings.HasPrefix(key, agentcard.KeyPrefix):
		return agentcard.Validator{}.Validate(key, value)
	case strings.HasPrefix(key, IndexKeyPrefix):
		_, err := validateIndex(key, value)
		return err
	}
	return badRecord("key", "%.80q is not a nova card or index key", key)
}

func validateIndex(key string, value []byte) (Index, error) {
	host, err := ParseIndexKey(key)
	if err != nil {
		return Index{}, err
	}
	ix, err := OpenIndex(value)
	if err != nil {
		return Index{}, err
	}
	if ix.Host != host {
		return Index{}, badRecord("index.host", "index signed by %s is stored under %s", ix.Host, host)
	}
	return ix, nil
}

// Select picks the best valid value for key; it fails when none is valid.
func (Validator) Select(key string, values [][]byte) (int, error) {
	switch {
	case strings.HasPrefix(key, agentcard.KeyPrefix):
		return agentcard.Validator{}.Select(key, values)
	case strings.HasPrefix(key, IndexKeyPrefix):
		best, bestSeen := -1, int64(0)
		for i, v := range values {
			ix, err := validateIndex(key, v)
			if err != nil {
				continue
			}
			if best < 0 || ix.LastSeenAt > bestSeen || (ix.LastSeenAt == bestSeen && bytes.Compare(v, values[best]) > 0) {
				best, bestSeen = i, ix.LastSeenAt
			}
		}
		if best < 0 {
			return 0, badRecord("key", "no valid index among %d values for %.80q", len(values), key)
		}
		return best, nil
	}
	return 0, badRecord("key", "%.80q is not a nova card or index key", key)
}
