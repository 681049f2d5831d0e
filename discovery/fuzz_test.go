package discovery_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz/FuzzValidator")

// FuzzValidator feeds arbitrary keys and pairs of values to the nova DHT
// validator. Validate and Select never panic; every refusal is
// INVALID_CARD; a value Validate accepts opens as a card (or index) signed
// by the key's peer, with the key's agent id; Select picks an accepted
// value, and the same bytes whatever the order. The seed corpus
// (testdata/fuzz/FuzzValidator) holds genuine records and forgeries;
// regenerate it with go test ./discovery -run TestWriteFuzzCorpus -args -write-corpus.
func FuzzValidator(f *testing.F) {
	for _, e := range corpus(f) {
		f.Add(e.key, e.a, e.b)
	}
	var v discovery.Validator
	f.Fuzz(func(t *testing.T, key string, a, b []byte) {
		okA, okB := check(t, v, key, a), check(t, v, key, b)
		i, err := v.Select(key, [][]byte{a, b})
		if err != nil {
			if okA || okB {
				t.Fatalf("Select failed with a valid value: %v", err)
			}
			if !errors.Is(err, agentcard.ErrInvalidCard) {
				t.Fatalf("Select refusal without INVALID_CARD: %v", err)
			}
			return
		}
		if i != 0 && i != 1 || (i == 0 && !okA) || (i == 1 && !okB) {
			t.Fatalf("Select picked %d (valid: %v %v)", i, okA, okB)
		}
		j, err := v.Select(key, [][]byte{b, a})
		if err != nil || !bytes.Equal([][]byte{a, b}[i], [][]byte{b, a}[j]) {
			t.Fatalf("Select is not stable: %d then %d (%v)", i, j, err)
		}
	})
}

// check validates value under key and, when it is accepted, that it is
// what the key names.
func check(t *testing.T, v discovery.Validator, key string, value []byte) bool {
	err := v.Validate(key, value)
	if err != nil {
		if !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Fatalf("refusal without INVALID_CARD: %T %v", err, err)
		}
		return false
	}
	if strings.HasPrefix(key, discovery.IndexKeyPrefix) {
		host, err := discovery.ParseIndexKey(key)
		ix, err2 := discovery.OpenIndex(value)
		if err != nil || err2 != nil || ix.Host != host {
			t.Fatalf("accepted index does not match its key: %v %v", err, err2)
		}
		return true
	}
	host, id, err := agentcard.ParseKey(key)
	if err != nil {
		t.Fatalf("accepted a value under a key that does not parse: %v", err)
	}
	c, signer, err := agentcard.Open(value)
	if err != nil || signer != host || c.ID != id || c.Host != host.String() {
		t.Fatalf("accepted card %s signed by %s does not match key %s (%v)", c.Address(), signer, key, err)
	}
	return true
}

type corpusEntry struct {
	key  string
	a, b []byte
}

// corpus builds the seed corpus from two fixed identities.
func corpus(tb testing.TB) map[string]corpusEntry {
	tb.Helper()
	key := func(seed byte) (crypto.PrivKey, peer.ID) {
		var s [32]byte
		s[0] = seed
		k, _, err := crypto.GenerateEd25519Key(chacha{mrand.NewChaCha8(s)})
		if err != nil {
			tb.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(k)
		return k, id
	}
	vk, vid := key(1)
	mk, mid := key(2)
	card := agentCard("venus", "echo", "codegen.react")
	card.Host = vid.String()
	card.LastSeenAt = 1767225600000
	v1 := mustSeal(tb, card, vk)
	card.Revision = 1
	v2 := mustSeal(tb, card, vk)
	card.LastSeenAt++
	v2b := mustSeal(tb, card, vk)
	ix, err := discovery.SealIndex(discovery.Index{LastSeenAt: 1767225600000, Agents: []discovery.IndexEntry{{ID: "venus", Revision: 1, Capabilities: []string{"echo"}}}}, vk)
	if err != nil {
		tb.Fatal(err)
	}
	ix2, _ := discovery.SealIndex(discovery.Index{LastSeenAt: 1767225600001}, vk)
	ck, ik := agentcard.Key(vid, "venus"), discovery.IndexKey(vid)
	out := map[string]corpusEntry{
		"card-revisions":       {ck, v1, v2},
		"card-heartbeats":      {ck, v2, v2b},
		"index-heartbeat":      {ik, ix, ix2},
		"card-vs-junk":         {ck, v1, []byte("junk")},
		"empty":                {"", nil, nil},
		"card-under-index-key": {ik, v1, ix},
		"other-agent-key":      {agentcard.Key(vid, "mars"), v1, v2},
		"unknown-prefix":       {"/nova/other/" + vid.String(), v1, ix},
		"bad-peer-in-key":      {"/nova/card/nope/venus", v1, v2},
	}
	for name, f := range forgeries(tb, card, vid, mk, mid) {
		out["forged-"+strings.ReplaceAll(name, " ", "-")] = corpusEntry{f.key, f.value, v1}
	}
	return out
}

type chacha struct{ r *mrand.ChaCha8 }

func (c chacha) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestWriteFuzzCorpus rewrites testdata/fuzz/FuzzValidator when run with
// -write-corpus.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to regenerate testdata/fuzz/FuzzValidator")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzValidator")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, e := range corpus(t) {
		body := fmt.Sprintf("go test fuzz v1\nstring(%q)\n[]byte(%q)\n[]byte(%q)\n", e.key, e.a, e.b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
