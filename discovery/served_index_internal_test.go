package discovery

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
)

// TestOpenServedIndex: the index a host serves about itself on
// RecordsProtocol is taken without its signature being verified (the
// secure connection proves who sent it), but otherwise checked as
// OpenIndex checks it: it must decode, carry the index payload type and
// the host's key, and name the host that served it.
func TestOpenServedIndex(t *testing.T) {
	key := func() (crypto.PrivKey, peer.ID) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(k)
		return k, id
	}
	hk, host := key()
	ok, _ := key()
	ix := Index{LastSeenAt: 1, Agents: []IndexEntry{{ID: "echo", Revision: 3, Capabilities: []string{"echo"}}}}
	signed, err := SealIndex(ix, hk)
	if err != nil {
		t.Fatal(err)
	}
	got, err := openServedIndex(host, signed)
	if err != nil || got.Host != host || len(got.Agents) != 1 || got.Agents[0].ID != "echo" || got.Agents[0].Revision != 3 || got.LastSeenAt != 1 {
		t.Fatalf("openServedIndex(its own index) = %+v, %v", got, err)
	}

	// The signature is the envelope's last field: a flipped last byte
	// breaks it and nothing else.
	broken := bytes.Clone(signed)
	broken[len(broken)-1] ^= 1
	if _, err := OpenIndex(broken); err == nil {
		t.Fatal("OpenIndex took an index whose signature does not verify")
	}
	if got, err := openServedIndex(host, broken); err != nil || got.Host != host {
		t.Fatalf("openServedIndex(its own index, signature broken) = %+v, %v; the connection proves the sender", got, err)
	}

	othersIx, err := SealIndex(ix, ok)
	if err != nil {
		t.Fatal(err)
	}
	card, err := agentcard.Seal(agentcard.Card{ID: "echo", Name: "echo", Version: "1.0.0", Host: host.String(),
		Protocols: []string{"a2a/1.0"}, Capabilities: []agentcard.Capability{}}, hk)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string][]byte{
		"another host's index": othersIx,
		"a card":               card,
		"garbage":              []byte("not an envelope"),
		"truncated":            signed[:len(signed)/2],
		"too large":            make([]byte, MaxIndexSize+1),
		"empty":                nil,
	} {
		if got, err := openServedIndex(host, v); err == nil {
			t.Errorf("%s: openServedIndex(%s) = %+v, want an error", name, host, got)
		} else if !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: error %v does not match agentcard.ErrInvalidCard", name, err)
		}
	}
}
