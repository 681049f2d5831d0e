package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/agentcard"
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("node: store %s is locked: is another nova-node running with this data dir? Stop it or use --data-dir", path)
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
