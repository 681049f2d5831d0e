package node_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/discovery/invite"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

// TestPropertyHostileJoinToken: a token whose authority, identity or grant
// is not what it must be (random bytes, a key of another type, a grant for
// another peer or another authority) is refused with INVALID_TOKEN before
// anything is written to the data dir, and never panics. A token whose
// parts fit installs the identity.
func TestPropertyHostileJoinToken(t *testing.T) {
	authKey, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth, _ := peer.IDFromPrivateKey(authKey)
	joinerKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	joiner, _ := peer.IDFromPrivateKey(joinerKey)
	otherKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	other, _ := peer.IDFromPrivateKey(otherKey)
	ecdsaKey, _, _ := crypto.GenerateECDSAKeyPair(rand.Reader)
	marshal := func(k crypto.PrivKey) []byte {
		b, err := crypto.MarshalPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	seal := func(a, p peer.ID) []byte {
		b, err := authority.SealGrant(authority.Grant{Authority: a, Serial: 7, Peer: p, MaxTier: tiers.L1}, authKey)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := seal(auth, joiner)
	rapid.Check(t, func(rt *rapid.T) {
		tok := invite.Token{Swarm: "lab", Authority: []byte(auth), Identity: marshal(joinerKey), Grant: good}
		valid := true
		switch rapid.IntRange(0, 6).Draw(rt, "flaw") {
		case 1:
			tok.Authority = rapid.SliceOfN(rapid.Byte(), 1, invite.MaxAuthorityLen).Draw(rt, "authority")
			valid = false
		case 2:
			tok.Identity = rapid.SliceOfN(rapid.Byte(), 1, invite.MaxIdentityLen).Draw(rt, "identity")
			valid = false
		case 3:
			tok.Identity = marshal(ecdsaKey)[:min(len(marshal(ecdsaKey)), invite.MaxIdentityLen)]
			valid = false
		case 4:
			tok.Grant = rapid.SliceOfN(rapid.Byte(), 1, 600).Draw(rt, "grant")
			valid = false
		case 5:
			tok.Grant = seal(auth, other) // for another peer
			valid = false
		case 6:
			tok.Grant = seal(other, joiner) // in another swarm
			valid = false
		}
		if tok.Validate() != nil {
			return // Decode refuses it already (tested in discovery/invite)
		}
		dir := filepath.Join(t.TempDir(), "d")
		res, err := node.ApplyInviteWith(dir, tok, node.JoinOptions{})
		if valid {
			if err != nil || !res.IdentityInstalled || res.PeerID != joiner.String() || !res.Granted {
				rt.Fatalf("a fitting token: %+v, %v", res, err)
			}
			return
		}
		if err == nil {
			rt.Fatalf("a hostile token is accepted: %+v", res)
		}
		// A valid key in another place than an Ed25519 one may be refused
		// by the key type; every refusal here is the token's.
		var ie *node.InviteError
		if !errors.As(err, &ie) || protocol.CodeOf(err) != "INVALID_TOKEN" {
			rt.Fatalf("refusal %v: want INVALID_TOKEN", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			rt.Fatalf("a refused token wrote to the data dir (%v)", err)
		}
	})
}
