package agentcard_test

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
)

// An Opener answers as Open does, for cards it opened before as for new
// ones, genuine or tampered with, and hands each caller a card of its own.
func TestOpenerAnswersAsOpen(t *testing.T) {
	nodes := testNodes(t)
	o := agentcard.NewOpener(4)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.SampledFrom(nodes).Draw(t, "node")
		c := genCardWith(cardSpec{hosts: []string{"", n.id.String()}, origins: []agentcard.Origin{"", "local"}}).Draw(t, "card")
		data, err := agentcard.Seal(c, n.key)
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "tamper") {
			i := rapid.IntRange(0, len(data)-1).Draw(t, "byte")
			data = append([]byte(nil), data...)
			data[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "flip"))
		}
		want, wantSigner, wantErr := agentcard.Open(data)
		for range 2 {
			got, signer, err := o.Open(data)
			if (err == nil) != (wantErr == nil) || (err != nil && !errors.Is(err, agentcard.ErrInvalidCard)) {
				t.Fatalf("Opener: %v, Open: %v", err, wantErr)
			}
			if err == nil && (signer != wantSigner || !got.Equal(want)) {
				t.Fatalf("Opener gave %+v by %s, Open %+v by %s", got, signer, want, wantSigner)
			}
			if err == nil && len(got.Capabilities) > 0 {
				got.Capabilities[0].ID = "changed by a caller"
			}
		}
	})
}

// BenchmarkOpener opens a card the Opener has seen, as a peer's hellos
// present it again and again, next to Open.
func BenchmarkOpener(b *testing.B) {
	nodes := testNodes(b)
	data, err := agentcard.Seal(sampleCard("venus", "codegen.react"), nodes[0].key)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := agentcard.Open(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("opener-seen", func(b *testing.B) {
		o := agentcard.NewOpener(0)
		for b.Loop() {
			if _, _, err := o.Open(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
