package crdt

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// An Update is one signed write to a document: the delta a mutator made,
// with who made it and what it depends on, sealed in a libp2p signed
// envelope by its author. The author's replica is its peer ID, so a
// replica's dots can only be minted by the holder of that peer's key, and
// the bytes carry their signature wherever they go (gossip, catch-up
// answers, the store): any relay can be checked.
//
// An update of replica R mints exactly the dots R:First..Last, and names
// what it has seen by hash: Prev, R's update ending at First-1 (none when
// First is 1), and for every other replica X whose dots its delta's
// context holds, a Dep (X, the highest such seq, the hash of X's update
// holding that seq). A receiver joins an update only once it holds Prev
// and every Dep, so no update can claim (and so delete) dots that do not
// exist, nor pre-empt another replica's future writes: a hash cannot be
// named before the update it hashes exists.
type Update struct {
	// Raw is the signed envelope, as received or made; Hash is its SHA-256.
	Raw  []byte
	Hash Hash

	Doc    string
	Author string // the author's peer ID: the replica whose dots it mints
	Agent  string // the source agent, name@<author>
	First  uint64
	Last   uint64
	Prev   Hash // zero when First is 1
	Deps   []Dep
	Clock  delta.VersionVector // the author's clock after the update
	Time   int64               // the author's time, Unix milliseconds
	Delta  *delta.Delta
	Signer peer.ID

	paths []string // what it wrote, kept once Delta is joined and dropped
}

// Hash is the SHA-256 of an update's signed bytes.
type Hash [32]byte

func (h Hash) String() string { return fmt.Sprintf("%x", h[:6]) }

// IsZero reports whether h names nothing.
func (h Hash) IsZero() bool { return h == Hash{} }

// Dep names the update of Replica that holds dot (Replica, Seq), by hash.
type Dep struct {
	Replica string
	Seq     uint64
	Hash    Hash
}

// Limits of an update, checked before anything is applied.
const (
	// MaxSeq is the greatest sequence number an update may mint or name:
	// far beyond any real history, far below the uint64 limit, so no
	// received update can push a replica's counter to where its next
	// write fails.
	MaxSeq = 1 << 53
	// MaxUpdateSize caps an update's signed bytes.
	MaxUpdateSize = delta.MaxEncodedSize
	// MaxDeps caps the replicas one update depends on.
	MaxDeps = delta.MaxClockEntries
)

// UpdateDomain is the libp2p envelope domain of signed updates.
const UpdateDomain = "nova-crdt-update"

// updateCodec is the envelope payload type of a signed update (wire v2).
const updateCodec = "/nova/crdt/update/2"

// The error codes of refused updates.
const (
	// CodeForgedUpdate: a signature that does not verify, or an update
	// whose signer is not the replica whose dots it mints.
	CodeForgedUpdate = "CRDT_FORGED_UPDATE"
	// CodeInvalidUpdate: a well signed update that breaks a rule (dots it
	// does not mint, a context beyond what it names, limits).
	CodeInvalidUpdate = "CRDT_INVALID_UPDATE"
	// CodeEquivocation: two valid updates of one replica minting the same
	// dots (a replica whose key signs two histories).
	CodeEquivocation = "CRDT_EQUIVOCATION"
	// CodeLegacyDocument: a document stored without signatures.
	CodeLegacyDocument = "CRDT_LEGACY_DOCUMENT"
)

// UpdateError refuses an update; Code is CodeForgedUpdate,
// CodeInvalidUpdate or CodeDeserializationFailed.
type UpdateError struct {
	code   string
	reason string
	cause  error
}

func (e *UpdateError) Error() string {
	s := "crdt: " + e.code + ": " + e.reason
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Code is the error's code.
func (e *UpdateError) Code() string  { return e.code }
func (e *UpdateError) Unwrap() error { return e.cause }

func updateErr(code string, cause error, format string, args ...any) *UpdateError {
	return &UpdateError{code: code, reason: fmt.Sprintf(format, args...), cause: cause}
}

// ErrorCode returns the code of a refused update's error, "" for others.
func ErrorCode(err error) string {
	var ue *UpdateError
	if errors.As(err, &ue) {
		return ue.code
	}
	return ""
}

// updateWire is the signed payload: the seed's CRDTSyncMessage keys
// (sourceAgentId, vectorClock, payload, timestamp) plus what makes it
// Byzantine fault tolerant.
type updateWire struct {
	Doc     string              `cbor:"doc"`
	Author  string              `cbor:"author"`
	First   uint64              `cbor:"first"`
	Last    uint64              `cbor:"last"`
	Prev    []byte              `cbor:"prev,omitempty"`
	Deps    []depWire           `cbor:"deps,omitempty"`
	Source  string              `cbor:"sourceAgentId"`
	Clock   delta.VersionVector `cbor:"vectorClock"`
	Payload []byte              `cbor:"payload"`
	Time    int64               `cbor:"timestamp"`
}

type depWire struct {
	_       struct{} `cbor:",toarray"`
	Replica string
	Seq     uint64
	Hash    []byte
}

var updateDec = wirecodec.NewDecMode(wirecodec.Limits{
	MaxNestedLevels: 4, MaxArrayElements: MaxDeps, MaxMapPairs: delta.MaxClockEntries, RejectUnknownFields: true,
})

// updateRecord is the libp2p record of a signed update: the raw payload.
type updateRecord struct{ data []byte }

func (*updateRecord) Domain() string                   { return UpdateDomain }
func (*updateRecord) Codec() []byte                    { return []byte(updateCodec) }
func (r *updateRecord) MarshalRecord() ([]byte, error) { return r.data, nil }
func (r *updateRecord) UnmarshalRecord(b []byte) error { r.data = b; return nil }

// UpdateFields is what a caller of [SignUpdate] gives: the rest (author,
// dots) comes from the key and the delta.
type UpdateFields struct {
	Doc   string
	Agent string // name@<author peer ID>
	Prev  Hash
	Deps  []Dep
	Clock delta.VersionVector
	Time  int64
}

// SignUpdate seals x, a delta made by a mutator of the author's replica
// (the peer ID of key), and returns the update, checked as a receiver
// would check it.
func SignUpdate(key crypto.PrivKey, f UpdateFields, x *delta.Delta) (*Update, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("crdt: sign update: %w", err)
	}
	r, first, last, ok := x.MintedRange()
	if !ok || r != id.String() {
		return nil, errors.New("crdt: sign update: the delta does not mint one range of the signer's dots")
	}
	payload, err := delta.EncodeDelta(x)
	if err != nil {
		return nil, err
	}
	w := updateWire{Doc: f.Doc, Author: r, First: first, Last: last, Source: f.Agent, Clock: f.Clock, Payload: payload, Time: f.Time}
	if !f.Prev.IsZero() {
		w.Prev = f.Prev[:]
	}
	deps := slices.Clone(f.Deps)
	slices.SortFunc(deps, func(a, b Dep) int { return strings.Compare(a.Replica, b.Replica) })
	for _, d := range deps {
		w.Deps = append(w.Deps, depWire{Replica: d.Replica, Seq: d.Seq, Hash: bytes.Clone(d.Hash[:])})
	}
	body, err := wirecodec.EncMode().Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("crdt: sign update: %w", err)
	}
	env, err := record.Seal(&updateRecord{data: body}, key)
	if err != nil {
		return nil, fmt.Errorf("crdt: sign update: %w", err)
	}
	b, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("crdt: sign update: %w", err)
	}
	return DecodeUpdate(b)
}

// DecodeUpdate verifies and decodes a signed update: size, signature, the
// signer is the author, strict CBOR with limits, and every rule a single
// update must keep (see [Update]): it mints exactly Author:First..Last;
// its entries carry only those dots; its context holds Author's dots up to
// Last at most, and another replica's dots only up to the seq of that
// replica's Dep (a replica without a Dep: none); every seq is in
// 1..MaxSeq; deps are sorted, one per replica, each naming a replica the
// context holds at exactly that seq. It needs no state and no network.
// Errors are *UpdateError.
func DecodeUpdate(b []byte) (*Update, error) {
	if len(b) > MaxUpdateSize {
		return nil, updateErr(CodeDeserializationFailed, nil, "update of %d bytes, more than %d", len(b), MaxUpdateSize)
	}
	var rec updateRecord
	env, err := record.ConsumeTypedEnvelope(b, &rec)
	if err != nil {
		if errors.Is(err, record.ErrInvalidSignature) {
			return nil, updateErr(CodeForgedUpdate, err, "bad signature")
		}
		return nil, updateErr(CodeDeserializationFailed, err, "not a signed update")
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return nil, updateErr(CodeForgedUpdate, err, "signer key")
	}
	var w updateWire
	if err := updateDec.Unmarshal(rec.data, &w); err != nil {
		return nil, updateErr(CodeDeserializationFailed, err, "payload")
	}
	if w.Author != signer.String() {
		return nil, updateErr(CodeForgedUpdate, nil, "author %.16s is not the signer %s", w.Author, signer)
	}
	u := &Update{Raw: b, Hash: sha256.Sum256(b), Doc: w.Doc, Author: w.Author, Agent: w.Source, First: w.First, Last: w.Last,
		Clock: w.Clock, Time: w.Time, Signer: signer}
	bad := func(format string, args ...any) (*Update, error) {
		return nil, updateErr(CodeInvalidUpdate, nil, format, args...)
	}
	if !ValidName(w.Doc) {
		return bad("document name %q", w.Doc)
	}
	if _, host, ok := strings.Cut(w.Source, "@"); !ok || host != w.Author || len(w.Source) > delta.MaxIDLen {
		return bad("source agent %.80q is not an agent of the author", w.Source)
	}
	if w.First < 1 || w.First > w.Last || w.Last > MaxSeq {
		return bad("dots %d..%d out of 1..%d", w.First, w.Last, uint64(MaxSeq))
	}
	switch {
	case w.First == 1 && len(w.Prev) != 0:
		return bad("a first update names a previous one")
	case w.First > 1 && len(w.Prev) != len(Hash{}):
		return bad("prev must be a %d-byte hash", len(Hash{}))
	}
	copy(u.Prev[:], w.Prev)
	if w.Time <= 0 {
		return bad("timestamp must be positive")
	}
	if len(w.Clock) == 0 || w.Clock[w.Author] != w.Last {
		return bad("vectorClock must count the author's last dot")
	}
	for _, n := range w.Clock {
		if n == 0 || n > MaxSeq {
			return bad("vectorClock counts out of 1..%d", uint64(MaxSeq))
		}
	}
	deps := make(map[string]uint64, len(w.Deps))
	for i, d := range w.Deps {
		if i > 0 && w.Deps[i-1].Replica >= d.Replica {
			return bad("deps not sorted by replica, or repeated")
		}
		if d.Replica == w.Author || d.Seq < 1 || d.Seq > MaxSeq || len(d.Hash) != len(Hash{}) {
			return bad("dep %d: replica, seq or hash", i)
		}
		dep := Dep{Replica: d.Replica, Seq: d.Seq}
		copy(dep.Hash[:], d.Hash)
		u.Deps = append(u.Deps, dep)
		deps[d.Replica] = d.Seq
	}
	x, err := delta.DecodeDelta(w.Payload)
	if err != nil {
		return nil, updateErr(CodeDeserializationFailed, err, "delta")
	}
	if r, lo, hi, ok := x.MintedRange(); !ok || r != w.Author || lo != w.First || hi != w.Last {
		return bad("the delta does not mint exactly %d..%d of its author", w.First, w.Last)
	}
	if !x.EntriesMinted() {
		return bad("the delta carries entries it does not mint")
	}
	ctx := x.Context()
	for _, r := range ctx.Replicas() {
		limit, ok := deps[r]
		if r == w.Author {
			limit, ok = w.Last, true
		}
		if !ok {
			return bad("the context holds dots of %.16s, which it does not depend on", r)
		}
		if ctx.Max(r) > limit || (r != w.Author && ctx.Max(r) != limit) {
			return bad("the context holds dots of %.16s up to %d, the dep says %d", r, ctx.Max(r), limit)
		}
	}
	if len(deps) != len(ctx.Replicas())-1 {
		return bad("a dep names a replica the context does not hold")
	}
	u.Delta = x
	return u, nil
}
