package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A store cut off anywhere (a full disk, a partial copy) must be refused
// with StoreDamagedError, not mapped past its end: bbolt would read the
// missing pages through its memory map and the process would die of
// SIGBUS with a stack trace, as `nova-node run` did on a nova.db cut to
// 16,000 of its 32,768 bytes.
func TestTruncatedStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Grow the file over several pages, as cards, documents and the
	// outbox do.
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCards)
		for i := range 64 {
			if err := b.Put(fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte{byte(i)}, 900)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, StoreFile)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) < 16<<10 {
		t.Fatalf("the store is only %d bytes: the test needs a file of several pages", len(whole))
	}

	cut := t.TempDir()
	cutPath := filepath.Join(cut, StoreFile)
	refused, opened := 0, 0
	for n := 1; n < len(whole); n += 997 { // a prime step: page boundaries and between
		if err := os.WriteFile(cutPath, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openStore(cut)
		if err == nil {
			// bbolt grows the file ahead of its pages: a cut that keeps
			// every page up to the high-water mark opens, and all its
			// data must read back (a missing page would kill the test
			// with SIGBUS here).
			keys := 0
			err := s.db.View(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketCards).ForEach(func(k, v []byte) error {
					if len(v) != 900 {
						return fmt.Errorf("key %s: %d bytes", k, len(v))
					}
					keys++
					return nil
				})
			})
			s.close()
			if err != nil || keys != 64 {
				t.Fatalf("a store cut to %d of %d bytes opened, and read %d keys: %v", n, len(whole), keys, err)
			}
			opened++
			continue
		}
		var d *StoreDamagedError
		if !errors.As(err, &d) {
			t.Fatalf("cut to %d bytes: %v, want a StoreDamagedError", n, err)
		}
		if d.Code() != "STORE_DAMAGED" || d.Hint() == "" {
			t.Fatalf("cut to %d bytes: code %q, hint %q", n, d.Code(), d.Hint())
		}
		refused++
	}
	t.Logf("%d cuts of a %d-byte store refused, %d opened with all their data", refused, len(whole), opened)
	if refused < 10 {
		t.Fatalf("only %d cuts refused", refused)
	}

	// Garbage is refused with the same error; the intact file still opens.
	if err := os.WriteFile(cutPath, bytes.Repeat([]byte("garbage!"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	var d *StoreDamagedError
	if _, err := openStore(cut); !errors.As(err, &d) {
		t.Fatalf("a garbage store: %v, want a StoreDamagedError", err)
	}
	if err := os.WriteFile(cutPath, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = openStore(cut)
	if err != nil {
		t.Fatalf("the intact store: %v", err)
	}
	s.close()
}

// A meta page that checks out but claims more pages than a uint64 of bytes
// holds is refused, not let through by an overflowing product.
func TestStoreMetaClaimingHugeSizeIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	path := filepath.Join(dir, StoreFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, ok := readBoltMeta(bytes.NewReader(b), 0)
	if !ok {
		t.Fatal("no meta page at 0")
	}
	meta := b[boltPageHeader : boltPageHeader+boltMetaLen]
	o := binary.NativeEndian
	o.PutUint64(meta[40:], math.MaxUint64/uint64(m0.pageSize)+1) // hwm*pageSize wraps to a small number
	o.PutUint64(meta[48:], m0.txid+100)                          // the meta bbolt would use
	h := fnv.New64a()
	h.Write(meta[:56])
	o.PutUint64(meta[56:], h.Sum64())
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var d *StoreDamagedError
	if _, err := openStore(dir); !errors.As(err, &d) {
		t.Fatalf("a meta claiming 2^64 bytes: %v, want a StoreDamagedError", err)
	}
}
