package protocol

import (
	"crypto/rand"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"
)

// TestLastPublisherTextIsString: whatever order publishers come in, and
// from however many validation workers at once, the text kept for the last
// publisher is always the text of the publisher asked about.
func TestLastPublisherTextIsString(t *testing.T) {
	ids := make([]peer.ID, 4)
	for i := range ids {
		_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if ids[i], err = peer.IDFromPublicKey(pub); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		order := rapid.SliceOf(rapid.IntRange(0, len(ids)-1)).Draw(t, "order")
		var nilKeeps *lastPublisher
		l := &lastPublisher{}
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for k, i := range order {
					if k%2 != w {
						continue
					}
					if got := l.text(ids[i]); got != ids[i].String() {
						t.Errorf("text of %s is %s", ids[i], got)
					}
				}
			})
		}
		wg.Wait()
		for _, i := range order {
			if got := nilKeeps.text(ids[i]); got != ids[i].String() {
				t.Fatalf("nil keeper: text of %s is %s", ids[i], got)
			}
		}
	})
}
