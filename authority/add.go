package authority

import (
	"github.com/libp2p/go-libp2p/core/record"
)

// Kinds of record, as [Book.Add] reports them.
const (
	KindGrant      = "grant"
	KindRevocation = "revocation"
	KindUpdate     = "update"
)

// Change is what [Book.Add] did with a record.
type Change struct {
	Kind    string
	Changed bool // the record was new and is held (or, for a revocation, applied)
	Grant   Grant
	// Revoked is the grant a new revocation dropped (zero Serial if the
	// book held none with its serial).
	Revoked    HeldGrant
	Revocation Revocation
}

// Add verifies and applies one signed record of any kind, as peers present
// them: [Book.AddUpdate], [Book.AddRevocation] or [Book.AddGrant] by its
// payload type. A record's kind is read before its signature is checked,
// and then checked by the kind's own Open.
func (b *Book) Add(signed []byte) (Change, error) {
	if len(signed) > MaxRecordSize {
		return Change{Kind: "record"}, invalid("record", "is %d bytes, more than %d", len(signed), MaxRecordSize)
	}
	h := Hash(signed)
	b.mu.RLock()
	kind, seen := b.known[h]
	b.mu.RUnlock()
	if seen {
		// Held or applied before: its signature was checked then.
		return Change{Kind: kind}, nil
	}
	ch, err := b.add(signed)
	if err == nil {
		b.mu.Lock()
		if len(b.known) >= maxKnown {
			clear(b.known)
		}
		b.known[h] = ch.Kind
		b.mu.Unlock()
	}
	return ch, err
}

// maxKnown bounds the hashes of records a book remembers having checked.
const maxKnown = 2 * (MaxUpdates + MaxRevocations + MaxGrants)

func (b *Book) add(signed []byte) (Change, error) {
	env, err := record.UnmarshalEnvelope(signed)
	if err != nil {
		return Change{Kind: "record"}, invalid("record", "malformed envelope: %v", err)
	}
	switch string(env.PayloadType) {
	case grantType:
		g, changed, err := b.AddGrant(signed)
		return Change{Kind: KindGrant, Changed: changed, Grant: g}, err
	case revocationType:
		r, dropped, changed, err := b.AddRevocation(signed)
		return Change{Kind: KindRevocation, Changed: changed, Revocation: r, Revoked: dropped}, err
	case updateType:
		changed, err := b.AddUpdate(signed)
		return Change{Kind: KindUpdate, Changed: changed}, err
	}
	return Change{Kind: "record"}, invalid("record", "unknown payload type %q", truncate(string(env.PayloadType), 64))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Records returns what a node presents in its hellos: the admin log in
// order, then the revocations, then the grants that count now or later.
func (b *Book) Records() [][]byte {
	out := b.Log()
	out = append(out, b.Revocations()...)
	return append(out, b.Presentable("")...)
}
