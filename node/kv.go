package node

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// kvBuckets are the top-level bbolt buckets that kvStore may use: the
// proposals of the negotiator and the swarms of the coordinator. They sit
// next to the node's own buckets (cards, outbox, watermarks, crdt), so the
// names are fixed here rather than taken from the caller.
var kvBuckets = map[string]bool{negotiation.Bucket: true, taskswarm.Bucket: true}

// kvStore is negotiation.KV on the node's bbolt file: each bucket is a
// top-level bbolt bucket of kvBuckets, created on first write; keys and
// values are stored as given. Every Put and Delete is one committed
// (fsynced) transaction, so it is durable when it returns.
type kvStore struct{ s *store }

var _ negotiation.KV = kvStore{}

func checkKVBucket(bucket string) error {
	if !kvBuckets[bucket] {
		return fmt.Errorf("node: kv bucket %q is not one of the task buckets", bucket)
	}
	return nil
}

// Put stores val under key in bucket.
func (k kvStore) Put(bucket, key string, val []byte) error {
	if err := checkKVBucket(bucket); err != nil {
		return err
	}
	if key == "" {
		return errors.New("node: kv key must not be empty")
	}
	return k.s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), val)
	})
}

// Delete removes key from bucket; a missing key or bucket is not an error.
func (k kvStore) Delete(bucket, key string) error {
	if err := checkKVBucket(bucket); err != nil {
		return err
	}
	if key == "" {
		return nil
	}
	return k.s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
}

// ForEach calls fn for every key of bucket in key order. It reads the bucket
// in one read transaction and calls fn after it ends, so fn may call Put
// and Delete (bbolt would deadlock on a write inside a read transaction of
// the same goroutine when the file grows).
func (k kvStore) ForEach(bucket string, fn func(key string, val []byte) error) error {
	if err := checkKVBucket(bucket); err != nil {
		return err
	}
	type kv struct {
		k string
		v []byte
	}
	var all []kv
	err := k.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(key, v []byte) error {
			all = append(all, kv{string(key), bytes.Clone(v)})
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("node: read %s: %w", bucket, err)
	}
	for _, e := range all {
		if err := fn(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}
