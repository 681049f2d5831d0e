package node

import (
	bolt "go.etcd.io/bbolt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/node/connhealth"
)

// bucketAddrs holds the address book of connhealth (key: a peer ID's
// bytes; value: the book's entry).
var bucketAddrs = []byte("peeraddrs")

// addrStore is the address book's persistence (connhealth.Store) on the
// node's bbolt file: bucket peeraddrs, created on the first write.
type addrStore struct{ s *store }

var _ connhealth.Store = addrStore{}

// ForEachAddrs reads the bucket in one read transaction.
func (a addrStore) ForEachAddrs(fn func(key, val []byte) error) error {
	return a.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAddrs)
		if b == nil {
			return nil
		}
		return b.ForEach(fn)
	})
}

// UpdateAddrs runs fn on the bucket in one write transaction.
func (a addrStore) UpdateAddrs(fn func(connhealth.BookTx) error) error {
	return a.s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAddrs)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

// newHealth builds the owner of the node's connection health
// (connhealth), with the address book in the store and the configured
// peers to keep connected (Config.Validate checked their addresses).
func (n *Node) newHealth() *connhealth.Monitor {
	peers := make([]peer.AddrInfo, 0, len(n.cfg.Peers))
	for _, a := range n.cfg.Peers {
		if ai, err := parsePeerAddr(a); err == nil {
			peers = append(peers, *ai)
		}
	}
	return connhealth.New(connhealth.WithStore(addrStore{n.db}), connhealth.WithPeers(peers...))
}
