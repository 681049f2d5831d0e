package discovery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	lprecord "github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/core/routing"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

// forge signs c as given with key, bypassing agentcard.Seal's checks, the
// way a malicious node would.
func forge(t testing.TB, c agentcard.Card, key crypto.PrivKey) []byte {
	t.Helper()
	env, err := lprecord.Seal(&agentcard.Record{Card: c}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSeal(t testing.TB, c agentcard.Card, key crypto.PrivKey) []byte {
	t.Helper()
	b, err := agentcard.Seal(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func genKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return k, id
}

// forgeries returns records a malicious node (key mk) could try to store
// under the victim's keys, by name.
func forgeries(t testing.TB, victim agentcard.Card, vid peer.ID, mk crypto.PrivKey, mid peer.ID) map[string]struct {
	key   string
	value []byte
} {
	cardKey := agentcard.Key(vid, victim.ID)
	resigned := victim.Clone()
	resigned.Revision = 99
	own := victim.Clone()
	own.Host = mid.String()
	own.Revision = 99
	ix, err := discovery.SealIndex(discovery.Index{LastSeenAt: 1767225601000, Agents: []discovery.IndexEntry{{ID: victim.ID, Revision: 99}}}, mk)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		key   string
		value []byte
	}{
		"re-signed by another key":      {cardKey, forge(t, resigned, mk)},
		"own card under the victim key": {cardKey, mustSeal(t, own, mk)},
		"index signed by another key":   {discovery.IndexKey(vid), ix},
	}
}

func TestValidatorRefusesForgeries(t *testing.T) {
	vk, vid := genKey(t)
	mk, mid := genKey(t)
	victim := agentCard("venus", "echo")
	victim.Host = vid.String()
	good := mustSeal(t, victim, vk)
	var v discovery.Validator
	if err := v.Validate(agentcard.Key(vid, "venus"), good); err != nil {
		t.Fatalf("the victim's own card: %v", err)
	}
	for name, f := range forgeries(t, victim, vid, mk, mid) {
		err := v.Validate(f.key, f.value)
		if !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: Validate = %v, want INVALID_CARD", name, err)
		}
		if f.key == agentcard.Key(vid, "venus") {
			if i, err := v.Select(f.key, [][]byte{f.value, good}); err != nil || i != 1 {
				t.Errorf("%s: Select = %d, %v; want the genuine card", name, i, err)
			}
		}
	}
	// The mismatches the key can express.
	for name, kv := range map[string][2]string{
		"card under another agent id": {agentcard.Key(vid, "mars"), string(good)},
		"card under an index key":     {discovery.IndexKey(vid), string(good)},
		"unknown kind of key":         {"/nova/other/" + vid.String(), string(good)},
		"junk":                        {agentcard.Key(vid, "venus"), "junk"},
	} {
		if err := v.Validate(kv[0], []byte(kv[1])); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	if _, err := v.Select("/nova/other/x", [][]byte{good}); err == nil {
		t.Error("Select accepted an unknown key")
	}
}

// permissive accepts anything: a malicious node's DHT validator.
type permissive struct{}

func (permissive) Validate(string, []byte) error        { return nil }
func (permissive) Select(string, [][]byte) (int, error) { return 0, nil }

// TestForgeriesRefusedOnEveryHop lets a malicious DHT server with no
// validation join a swarm and put forged records under a victim's keys:
// every honest node refuses them when they are put, ignores them when the
// attacker serves them, and keeps resolving the victim's genuine card.
func TestForgeriesRefusedOnEveryHop(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 6, slow)
	mh, mk := newHost(t)
	t.Cleanup(func() { mh.Close() })
	md, err := dht.New(mh, dht.ProtocolPrefix(discovery.ProtocolPrefix), dht.Mode(dht.ModeServer),
		dht.Validator(record.NamespacedValidator{discovery.Namespace: permissive{}}), dht.BootstrapPeers(nodes[0].info()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := mh.Connect(ctx, n.info()); err != nil {
			t.Fatal(err)
		}
	}
	waitRoutingTables(t, nodes, 4)
	publishAll(t, nodes)

	victim, vid := nodes[1], nodes[1].h.ID()
	vcard, ok := victim.reg.Get(agentName(1))
	if !ok {
		t.Fatal("victim has no card")
	}
	for name, f := range forgeries(t, vcard, vid, mk, mh.ID()) {
		// The attacker's PutValue succeeds locally and sends the record to
		// the closest honest peers, which refuse it.
		if err := md.PutValue(ctx, f.key, f.value); err != nil {
			t.Fatalf("%s: attacker's put: %v", name, err)
		}
	}
	// The attacker also claims to provide the victim's name.
	if err := md.Provide(ctx, discovery.KeyCID(discovery.NameKey(swarm, agentName(1))), true); err != nil {
		t.Fatal(err)
	}
	vkey := agentcard.Key(vid, agentName(1))
	for i, n := range nodes {
		if i == 1 {
			continue
		}
		// Whatever honest peers and the attacker answer, the best valid
		// value is the genuine one.
		v, err := n.svc.DHT().GetValue(ctx, vkey)
		if err != nil {
			t.Fatalf("node %d: GetValue: %v", i, err)
		}
		c, signer, err := agentcard.Open(v)
		if err != nil || signer != vid || c.Revision != vcard.Revision {
			t.Fatalf("node %d: GetValue gave revision %d signed by %s (%v); want the genuine card", i, c.Revision, signer, err)
		}
		// What honest nodes stored locally is genuine too.
		if v, err := n.svc.DHT().GetValue(ctx, vkey, routing.Offline); err == nil {
			if _, signer, err := agentcard.Open(v); err != nil || signer != vid {
				t.Fatalf("node %d stored a forged card", i)
			}
		}
		cards, err := n.svc.FindByName(ctx, agentName(1))
		if err != nil || len(cards) != 1 || cards[0].Host != vid.String() || cards[0].Revision != vcard.Revision {
			t.Fatalf("node %d: FindByName = %+v, %v; want only the genuine card", i, cards, err)
		}
		cards, err = n.svc.FindByCapability(ctx, "only-1")
		if err != nil || len(cards) != 1 || cards[0].Revision != vcard.Revision {
			t.Fatalf("node %d: FindByCapability = %+v, %v; want only the genuine card", i, cards, err)
		}
		if got, ok := n.reg.Get(vcard.Address()); !ok || got.Revision != vcard.Revision {
			t.Fatalf("node %d registry: %+v", i, got)
		}
		// Its own agent and, with the roster, every other node's: no more.
		if got := n.reg.FindByCapability("echo"); len(got) > len(nodes) {
			t.Fatalf("node %d merged extra cards: %d", i, len(got))
		}
	}
}
