package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/protocol"
)

// StoreFile is the bbolt database inside the data dir.
const StoreFile = "nova.db"

var bucketCards = []byte("cards")

// store is the node's one bbolt file. Every write is a committed (fsynced)
// transaction before the call returns.
type store struct {
	db *bolt.DB
}

func openStore(dataDir string) (*store, error) {
	path := filepath.Join(dataDir, StoreFile)
	if err := checkStoreFile(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, &DataDirInUseError{Path: path}
	}
	if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) ||
		errors.Is(err, bolterrors.ErrVersionMismatch) {
		return nil, &StoreDamagedError{Path: path, Reason: err.Error()}
	}
	if err != nil {
		return nil, fmt.Errorf("node: open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketCards)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("node: init store: %w", err)
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// card returns the persisted local card id.
func (s *store) card(id string) (agentcard.Card, bool, error) {
	var c agentcard.Card
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCards).Get([]byte(id))
		if b == nil {
			return nil
		}
		found = true
		return json.Unmarshal(b, &c)
	})
	if err != nil {
		return c, false, fmt.Errorf("node: read card %s: %w", id, err)
	}
	return c, found, nil
}

func (s *store) putCard(c agentcard.Card) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCards).Put([]byte(c.ID), b)
	})
}

// InitStore creates the data dir's store if needed and closes it.
func InitStore(dataDir string) error {
	s, err := openStore(dataDir)
	if err != nil {
		return err
	}
	return s.close()
}

var (
	bucketOutbox     = []byte("outbox")
	bucketWatermarks = []byte("watermarks")
	keyMeta          = []byte("meta")
)

// outboxStore is the router's persistence (protocol.Store) on the node's
// bbolt file: bucket outbox/<channel id> holds "meta" ({from, to}) and one
// key per unacknowledged envelope (8-byte big-endian sequence -> CBOR);
// bucket watermarks maps "<peerID>/<channel id>" to the highest sequence
// taken.
type outboxStore struct{ s *store }

type outboxMeta struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func (o outboxStore) SaveOutbox(ops []protocol.OutboxOp) error {
	return o.s.db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketOutbox)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Drop {
				if root.Bucket([]byte(op.Channel)) != nil {
					if err := root.DeleteBucket([]byte(op.Channel)); err != nil {
						return err
					}
				}
				continue
			}
			if len(op.Put) == 0 && op.From == "" {
				// Deletions only: nothing to do for a channel never written
				// (a replayed journal settles envelopes the outbox never held).
				if root.Bucket([]byte(op.Channel)) == nil {
					continue
				}
			}
			b, err := root.CreateBucketIfNotExists([]byte(op.Channel))
			if err != nil {
				return err
			}
			if op.From != "" {
				meta, _ := json.Marshal(outboxMeta{From: op.From, To: op.To})
				if err := b.Put(keyMeta, meta); err != nil {
					return err
				}
			}
			for _, it := range op.Put {
				if err := b.Put(binary.BigEndian.AppendUint64(nil, it.Seq), outboxValue(it)); err != nil {
					return err
				}
			}
			for _, seq := range op.Delete {
				if err := b.Delete(binary.BigEndian.AppendUint64(nil, seq)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (o outboxStore) LoadOutbox() ([]protocol.OutboxChannel, error) {
	var out []protocol.OutboxChannel
	err := o.s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketOutbox)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(k []byte) error {
			b := root.Bucket(k)
			var meta outboxMeta
			if err := json.Unmarshal(b.Get(keyMeta), &meta); err != nil {
				return fmt.Errorf("outbox channel %s: %w", k, err)
			}
			oc := protocol.OutboxChannel{ID: string(k), From: meta.From, To: meta.To}
			err := b.ForEach(func(key, v []byte) error {
				if len(key) == 8 {
					it := readOutboxValue(v)
					it.Seq = binary.BigEndian.Uint64(key)
					oc.Items = append(oc.Items, it)
				}
				return nil
			})
			if len(oc.Items) > 0 {
				out = append(out, oc)
			}
			return err
		})
	})
	return out, err
}

// outboxExpiry marks an outbox value that starts with the end of the
// envelope's time to live: 0xff, then unix milliseconds (8 bytes,
// big-endian), then the envelope's CBOR. An envelope's CBOR starts with a
// map header, never 0xff (a "break" code), so values written without one
// read as before.
const outboxExpiry = 0xff

func outboxValue(it protocol.OutboxItem) []byte {
	if it.Expires.IsZero() {
		return it.Env
	}
	v := make([]byte, 0, 9+len(it.Env))
	v = append(v, outboxExpiry)
	v = binary.BigEndian.AppendUint64(v, uint64(it.Expires.UnixMilli()))
	return append(v, it.Env...)
}

func readOutboxValue(v []byte) protocol.OutboxItem {
	if len(v) >= 9 && v[0] == outboxExpiry {
		return protocol.OutboxItem{Expires: time.UnixMilli(int64(binary.BigEndian.Uint64(v[1:9]))), Env: append([]byte(nil), v[9:]...)}
	}
	return protocol.OutboxItem{Env: append([]byte(nil), v...)}
}

func (o outboxStore) SaveWatermarks(w map[string]uint64) error {
	return o.s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketWatermarks)
		if err != nil {
			return err
		}
		now := uint64(time.Now().Unix())
		for k, v := range w {
			if err := b.Put([]byte(k), watermarkValue(v, now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteWatermarks deletes the watermarks of channels the router no
// longer remembers (protocol.WatermarkDeleter), in one transaction.
func (o outboxStore) DeleteWatermarks(keys []string) error {
	return o.s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWatermarks)
		if b == nil {
			return nil
		}
		for _, k := range keys {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// watermarkMaxAge is how long a channel's watermark is kept after it last
// moved. A sender retransmits only what it has not had acknowledged, so a
// watermark matters while its channel is in use; without an end, every
// channel a peer ever opened (a new one per agent pair each time it
// restarts) would stay in the store, and in memory from the next start.
const watermarkMaxAge = 90 * 24 * time.Hour

// watermarkValue is a watermark as stored: the sequence, then when it was
// saved (unix seconds), both big-endian. Stores written before the time
// was kept hold the sequence alone.
func watermarkValue(seq, unix uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), seq), unix)
}

// LoadWatermarks returns the watermarks saved within watermarkMaxAge and
// deletes older ones (and unreadable values). Watermarks stored without a
// time are dated now, so they age from this start.
func (o outboxStore) LoadWatermarks() (map[string]uint64, error) {
	out := map[string]uint64{}
	now := time.Now()
	err := o.s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWatermarks)
		if b == nil {
			return nil
		}
		var drop [][]byte
		legacy := map[string]uint64{}
		err := b.ForEach(func(k, v []byte) error {
			switch {
			case len(v) == 16:
				saved := time.Unix(int64(binary.BigEndian.Uint64(v[8:])), 0)
				if now.Sub(saved) > watermarkMaxAge {
					drop = append(drop, append([]byte(nil), k...))
					return nil
				}
				out[string(k)] = binary.BigEndian.Uint64(v)
			case len(v) == 8:
				seq := binary.BigEndian.Uint64(v)
				out[string(k)] = seq
				legacy[string(k)] = seq
			default:
				drop = append(drop, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		for k, seq := range legacy {
			if err := b.Put([]byte(k), watermarkValue(seq, uint64(now.Unix()))); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

var bucketCRDT = []byte("crdt")

// crdtStore keeps each document in bucket crdt/<doc>: key "state" holds the
// last snapshot, sub-bucket "log" the deltas joined since (crdt.Store).
type crdtStore struct{ s *store }

var (
	keyState  = []byte("state")
	bucketLog = []byte("log")
)

func (c crdtStore) LoadDoc(name string) ([]byte, [][]byte, error) {
	var state []byte
	var deltas [][]byte
	err := c.s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketCRDT)
		if root == nil {
			return nil
		}
		b := root.Bucket([]byte(name))
		if b == nil {
			return nil
		}
		if v := b.Get(keyState); v != nil {
			state = append([]byte(nil), v...)
		}
		if l := b.Bucket(bucketLog); l != nil {
			return l.ForEach(func(_, v []byte) error {
				deltas = append(deltas, append([]byte(nil), v...))
				return nil
			})
		}
		return nil
	})
	return state, deltas, err
}

func (c crdtStore) doc(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	root, err := tx.CreateBucketIfNotExists(bucketCRDT)
	if err != nil {
		return nil, err
	}
	return root.CreateBucketIfNotExists([]byte(name))
}

func (c crdtStore) AppendDelta(name string, delta []byte) error {
	return c.s.db.Update(func(tx *bolt.Tx) error {
		b, err := c.doc(tx, name)
		if err != nil {
			return err
		}
		l, err := b.CreateBucketIfNotExists(bucketLog)
		if err != nil {
			return err
		}
		seq, err := l.NextSequence()
		if err != nil {
			return err
		}
		return l.Put(binary.BigEndian.AppendUint64(nil, seq), delta)
	})
}

func (c crdtStore) AppendDeltas(name string, deltas [][]byte) error {
	return c.s.db.Update(func(tx *bolt.Tx) error {
		b, err := c.doc(tx, name)
		if err != nil {
			return err
		}
		l, err := b.CreateBucketIfNotExists(bucketLog)
		if err != nil {
			return err
		}
		for _, delta := range deltas {
			seq, err := l.NextSequence()
			if err != nil {
				return err
			}
			if err := l.Put(binary.BigEndian.AppendUint64(nil, seq), delta); err != nil {
				return err
			}
		}
		return nil
	})
}

func (c crdtStore) SaveDoc(name string, state []byte) error {
	return c.s.db.Update(func(tx *bolt.Tx) error {
		b, err := c.doc(tx, name)
		if err != nil {
			return err
		}
		if b.Bucket(bucketLog) != nil {
			if err := b.DeleteBucket(bucketLog); err != nil {
				return err
			}
		}
		return b.Put(keyState, state)
	})
}

func (c crdtStore) DocNames() ([]string, error) {
	var out []string
	err := c.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCRDT)
		if b == nil {
			return nil
		}
		return b.ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}
