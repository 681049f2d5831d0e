package node

import (
	"encoding/binary"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestWatermarksExpire: a watermark not saved for watermarkMaxAge is not
// loaded and leaves the store; one saved before times were kept is loaded
// and dated now; an unreadable value is deleted.
func TestWatermarksExpire(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	o := outboxStore{s}
	if err := o.SaveWatermarks(map[string]uint64{"p/fresh": 7}); err != nil {
		t.Fatal(err)
	}
	old := uint64(time.Now().Add(-watermarkMaxAge - time.Hour).Unix())
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWatermarks)
		if err := b.Put([]byte("p/stale"), watermarkValue(9, old)); err != nil {
			return err
		}
		if err := b.Put([]byte("p/legacy"), binary.BigEndian.AppendUint64(nil, 11)); err != nil {
			return err
		}
		return b.Put([]byte("p/garbage"), []byte{1, 2, 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.LoadWatermarks()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["p/fresh"] != 7 || got["p/legacy"] != 11 {
		t.Fatalf("loaded %v, want fresh=7 legacy=11", got)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWatermarks)
		if b.Get([]byte("p/stale")) != nil || b.Get([]byte("p/garbage")) != nil {
			t.Error("expired or unreadable watermark left in the store")
		}
		if v := b.Get([]byte("p/legacy")); len(v) != 16 {
			t.Errorf("legacy watermark not dated: %x", v)
		}
		return nil
	})
}
