package discovery

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	ds "github.com/ipfs/go-datastore"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-base32"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
)

// Documented bounds (docs/security.md, "Bounds") on the heap the DHT's
// stores take when full at their default limits.
const (
	recordHeapBound   = 96 << 20 // DefaultMaxRecordBytes of records, and their keys and maps
	providerHeapBound = 32 << 20 // DefaultMaxProviders provider records
)

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// 1,000 authors put 24 cards of 4 kB each, and 100 provider records each,
// through the stores kad-dht writes to, filed as kad-dht files them: the
// stores keep at most their totals, count every author, and take at most
// the documented heap. It allocates ~100 MiB: skipped with -short; run with
// go test -run TestStoresMemoryBounded ./discovery/
func TestStoresMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("memory bound: 124,000 puts")
	}
	const authors, cards, provides = 1000, 24, 100
	ctx := context.Background()
	ids := make([]peer.ID, authors)
	for i := range ids {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], _ = peer.IDFromPrivateKey(k)
	}
	var refused atomic.Uint64
	nop := zap.NewNop().Sugar()
	def := defaults()

	before := heapInUse()
	recs := newQuotaStore("record", def.records, recordAuthor, &refused, nop)
	value := make([]byte, 4<<10)
	for i := range cards {
		for _, p := range ids {
			key := agentcard.Key(p, fmt.Sprintf("agent-%d", i))
			dk := ds.NewKey("/" + Namespace + "/" + base32.RawStdEncoding.EncodeToString([]byte(key)))
			_ = recs.Put(ctx, dk, append([]byte(nil), value...))
		}
	}
	n, b, a := recs.usage()
	used := heapInUse() - before
	runtime.KeepAlive(recs)
	t.Logf("records: %d puts from %d authors: %d held (%.1f MiB) from %d authors, %d refused; heap +%.1f MiB",
		authors*cards, authors, n, float64(b)/(1<<20), a, refused.Load(), float64(used)/(1<<20))
	if n > DefaultMaxRecords || b > DefaultMaxRecordBytes || a != authors {
		t.Errorf("held %d records, %d bytes, %d authors; bounds %d, %d, and every author counted", n, b, a, DefaultMaxRecords, DefaultMaxRecordBytes)
	}
	if used > recordHeapBound {
		t.Errorf("the record store takes %d MiB of heap; documented bound %d MiB", used>>20, recordHeapBound>>20)
	}

	refused.Store(0)
	before = heapInUse()
	provs := newQuotaStore("provider", def.providers, providerAuthor, &refused, nop)
	for i := range provides {
		for _, p := range ids {
			mh := KeyCID(fmt.Sprintf("nova/s/cap/%d", i)).Hash()
			dk := ds.NewKey("/providers/" + base32.RawStdEncoding.EncodeToString(mh) + "/" + base32.RawStdEncoding.EncodeToString([]byte(p)))
			_ = provs.Put(ctx, dk, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
		}
	}
	n, _, a = provs.usage()
	used = heapInUse() - before
	runtime.KeepAlive(provs)
	t.Logf("providers: %d puts from %d peers: %d held from %d peers, %d refused; heap +%.1f MiB",
		authors*provides, authors, n, a, refused.Load(), float64(used)/(1<<20))
	if n > DefaultMaxProviders || a != authors {
		t.Errorf("held %d provider records from %d peers; bound %d, and every peer counted", n, a, DefaultMaxProviders)
	}
	if used > providerHeapBound {
		t.Errorf("the provider store takes %d MiB of heap; documented bound %d MiB", used>>20, providerHeapBound>>20)
	}
}
