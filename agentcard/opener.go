package agentcard

import (
	"crypto/sha256"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultOpenerSize is how many opened cards an [Opener] remembers per
// generation (two generations are kept).
const DefaultOpenerSize = 4096

// Opener is [Open] with a memory of the signed cards it opened: the same
// bytes open to the same card and signer (Open does not depend on the
// clock), so a card presented again, as every hello of a peer presents
// its cards, is not verified again, only decoded. Only cards that opened
// are remembered, by the SHA-256 of their bytes and with their signer but
// not the card (every node would hold each member's card once more), in
// two generations of at most size entries each, so what it holds is
// bounded whoever presents the cards. Its methods are safe for concurrent
// use.
type Opener struct {
	mu        sync.Mutex
	size      int
	cur, prev map[[sha256.Size]byte]peer.ID
}

// NewOpener returns an Opener remembering up to 2×size cards
// ([DefaultOpenerSize] when size ≤ 0).
func NewOpener(size int) *Opener {
	if size <= 0 {
		size = DefaultOpenerSize
	}
	return &Opener{size: size, cur: make(map[[sha256.Size]byte]peer.ID)}
}

// Open is [Open], without the signature check for bytes it opened before.
// The card returned is the caller's own. A nil Opener is Open.
func (o *Opener) Open(data []byte) (Card, peer.ID, error) {
	if o == nil || len(data) > MaxSignedCardSize {
		return Open(data) // refused by Open; not hashed
	}
	sum := sha256.Sum256(data)
	o.mu.Lock()
	signer, ok := o.cur[sum]
	if !ok {
		if signer, ok = o.prev[sum]; ok {
			o.putLocked(sum, signer)
		}
	}
	o.mu.Unlock()
	if ok {
		c, err := reopen(data, signer)
		return c, signer, err
	}
	c, signer, err := Open(data)
	if err != nil {
		return c, signer, err
	}
	o.mu.Lock()
	o.putLocked(sum, signer)
	o.mu.Unlock()
	return c, signer, nil
}

func (o *Opener) putLocked(sum [sha256.Size]byte, signer peer.ID) {
	if len(o.cur) >= o.size {
		o.prev, o.cur = o.cur, make(map[[sha256.Size]byte]peer.ID, o.size)
	}
	o.cur[sum] = signer
}
