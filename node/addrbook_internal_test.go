package node

import (
	"errors"
	"maps"
	"testing"

	"github.com/nova-node/nova-node/node/connhealth"
)

// addrStore keeps the address book in bucket peeraddrs: a new store has
// no entries, an update's writes are read back together, and an update
// that fails leaves nothing behind.
func TestAddrStoreCommitsWholeUpdates(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	a := addrStore{s}
	read := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		if err := a.ForEachAddrs(func(k, v []byte) error { got[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("a new store has entries: %v", got)
	}
	err = a.UpdateAddrs(func(tx connhealth.BookTx) error {
		return errors.Join(tx.Put([]byte("a"), []byte("1")), tx.Put([]byte("b"), []byte("2")), tx.Put([]byte("c"), []byte("3")), tx.Delete([]byte("c")))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := read(), map[string]string{"a": "1", "b": "2"}; !maps.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	boom := errors.New("boom")
	err = a.UpdateAddrs(func(tx connhealth.BookTx) error {
		_ = tx.Delete([]byte("a"))
		_ = tx.Put([]byte("d"), []byte("4"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failed update returned %v, want its error", err)
	}
	if got, want := read(), map[string]string{"a": "1", "b": "2"}; !maps.Equal(got, want) {
		t.Fatalf("after a failed update read %v, want %v", got, want)
	}
}
