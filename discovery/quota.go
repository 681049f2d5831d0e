package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-base32"
	"go.uber.org/zap"
)

// Record and provider limits of this node's DHT store (see [WithRecordLimits]
// and [WithProviderLimits]). kad-dht keeps whatever valid record any peer
// puts, under any key: without a bound, one peer storing valid 55 kB cards
// under its own key makes a node hold 183 MiB for every 3,457 of them.
//
// An honest node publishes, under its own key, one card per hosted agent
// and one index, plus its public key ("/pk/…"): the per-author bounds leave
// room for 254 agents of up to 16 kB each on average. It provides one
// name key per agent and one key per capability: 1024 provider records.
const (
	DefaultMaxRecordsPerAuthor     = 256
	DefaultMaxRecordBytesPerAuthor = 4 << 20
	DefaultMaxRecords              = 16384
	DefaultMaxRecordBytes          = 64 << 20
	DefaultMaxProvidersPerPeer     = 1024
	DefaultMaxProviders            = 65536
)

// Limits bounds what one store holds: per author (the peer a record is
// signed by and named after, or the peer that provides) and in total, in
// records and in bytes (key and value as stored). Zero means no bound.
type Limits struct {
	PerAuthor, PerAuthorBytes int
	Total, TotalBytes         int
}

// ErrStoreFull is returned to a peer whose put or provide would take this
// node's DHT store past one of its bounds: the author's share or the total.
// The record is not stored; the author's other records, and other authors'
// records, are kept. Records age out one TTL after their last put, so room
// comes back.
var ErrStoreFull = errors.New("discovery: DHT store full")

// quotaStore is a datastore that counts what it holds per author and in
// total, and refuses a Put beyond the bounds. kad-dht writes value and
// provider records through it, and deletes expired ones through it, so the
// counts follow the records. mu serialises writes so that the check and
// the count stay in step; reads go straight to the inner store.
type quotaStore struct {
	ds.Batching
	kind    string // "record" or "provider": for logs and errors
	lim     Limits
	author  func(ds.Key) string
	refused *atomic.Uint64
	log     *zap.SugaredLogger

	mu    sync.Mutex
	used  map[string]usage
	total usage
}

type usage struct{ n, bytes int }

func newQuotaStore(kind string, lim Limits, author func(ds.Key) string, refused *atomic.Uint64, log *zap.SugaredLogger) *quotaStore {
	return &quotaStore{
		Batching: dssync.MutexWrap(ds.NewMapDatastore()),
		kind:     kind, lim: lim, author: author, refused: refused, log: log,
		used: map[string]usage{},
	}
}

// sizeLocked returns the stored size of k (key and value), or 0 when absent.
func (q *quotaStore) sizeLocked(ctx context.Context, k ds.Key) (int, bool, error) {
	n, err := q.Batching.GetSize(ctx, k)
	if errors.Is(err, ds.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return len(k.String()) + n, true, nil
}

// Put stores value under k unless that takes its author or the store past
// a bound; replacing a record counts only the difference.
func (q *quotaStore) Put(ctx context.Context, k ds.Key, value []byte) error {
	a := q.author(k)
	q.mu.Lock()
	defer q.mu.Unlock()
	old, had, err := q.sizeLocked(ctx, k)
	if err != nil {
		return err
	}
	dn, db := 1, len(k.String())+len(value)-old
	if had {
		dn = 0
	}
	u, t := q.used[a], q.total
	u.n, u.bytes, t.n, t.bytes = u.n+dn, u.bytes+db, t.n+dn, t.bytes+db
	if over := q.over(u, t, had && db <= replaceSlack); over != "" && (dn > 0 || db > 0) {
		q.refused.Add(1)
		q.log.Debugw("DHT "+q.kind+" refused: store bound reached", "author", shortAuthor(a), "bound", over)
		return fmt.Errorf("%w: %s of %s refused, %s", ErrStoreFull, q.kind, shortAuthor(a), over)
	}
	if err := q.Batching.Put(ctx, k, value); err != nil {
		return err
	}
	q.used[a], q.total = u, t
	return nil
}

// replaceSlack is how many bytes a replaced record may grow past the byte
// bounds: kad-dht stamps each stored record with its receive time, whose
// text varies by a few bytes, so an author's unchanged republish at the
// bound would otherwise be refused. The byte bounds stay hard at
// replaceSlack bytes per record above their values.
const replaceSlack = 64

// over names the first bound u (an author's usage) or t (the total)
// breaks; slack raises the byte bounds by replaceSlack per record.
func (q *quotaStore) over(u, t usage, slack bool) string {
	l := q.lim
	authorBytes, totalBytes := l.PerAuthorBytes, l.TotalBytes
	if slack {
		authorBytes += replaceSlack * max(l.PerAuthor, 1)
		totalBytes += replaceSlack * max(l.Total, 1)
	}
	switch {
	case l.PerAuthor > 0 && u.n > l.PerAuthor:
		return fmt.Sprintf("the author holds %d %ss, the most one may", l.PerAuthor, q.kind)
	case l.PerAuthorBytes > 0 && u.bytes > authorBytes:
		return fmt.Sprintf("the author's %ss would exceed %d bytes", q.kind, l.PerAuthorBytes)
	case l.Total > 0 && t.n > l.Total:
		return fmt.Sprintf("this node holds %d %ss, the most it keeps", l.Total, q.kind)
	case l.TotalBytes > 0 && t.bytes > totalBytes:
		return fmt.Sprintf("this node's %ss would exceed %d bytes", q.kind, l.TotalBytes)
	}
	return ""
}

// Delete removes k and gives its room back to its author.
func (q *quotaStore) Delete(ctx context.Context, k ds.Key) error {
	a := q.author(k)
	q.mu.Lock()
	defer q.mu.Unlock()
	old, had, err := q.sizeLocked(ctx, k)
	if err != nil {
		return err
	}
	if err := q.Batching.Delete(ctx, k); err != nil {
		return err
	}
	if had {
		u := q.used[a]
		u.n, u.bytes = u.n-1, u.bytes-old
		if u.n <= 0 {
			delete(q.used, a)
		} else {
			q.used[a] = u
		}
		q.total.n, q.total.bytes = q.total.n-1, q.total.bytes-old
	}
	return nil
}

// Batch applies its writes one by one through Put and Delete, so each is
// checked and counted.
func (q *quotaStore) Batch(context.Context) (ds.Batch, error) { return ds.NewBasicBatch(q), nil }

// usage returns what the store holds in total and how many authors hold it.
func (q *quotaStore) usage() (records, bytes, authors int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total.n, q.total.bytes, len(q.used)
}

// recordAuthor is the author of a value record as kad-dht files it
// ("/<namespace>/<base32 of the record key>"): the peer a nova card or
// index key names ("/nova/card/<peer>/<agent>", "/nova/index/<peer>"),
// which the validator requires to be the signer, or the peer whose public
// key a "/pk/<peer>" record holds. Anything else shares the "" author.
func recordAuthor(k ds.Key) string {
	raw, err := base32.RawStdEncoding.DecodeString(k.BaseNamespace())
	if err != nil {
		return ""
	}
	ns, rest, err := record.SplitKey(string(raw))
	if err != nil {
		return ""
	}
	switch ns {
	case Namespace:
		// "card/<peer>/<agent>" or "index/<peer>"
		_, after, _ := strings.Cut(rest, "/")
		p, _, _ := strings.Cut(after, "/")
		return p
	case "pk":
		if id, err := peer.IDFromBytes([]byte(rest)); err == nil {
			return id.String()
		}
	}
	return ""
}

// providerAuthor is the provider of a provider record as kad-dht files it
// ("/providers/<base32 key>/<base32 peer ID>"). kad-dht stores a provider
// record only for the peer that sent it.
func providerAuthor(k ds.Key) string {
	raw, err := base32.RawStdEncoding.DecodeString(k.BaseNamespace())
	if err != nil {
		return ""
	}
	id, err := peer.IDFromBytes(raw)
	if err != nil {
		return ""
	}
	return id.String()
}

func shortAuthor(a string) string {
	if a == "" {
		return "an unknown author"
	}
	if len(a) > 8 {
		return "…" + a[len(a)-8:]
	}
	return a
}
