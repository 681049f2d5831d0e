package node

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/libp2p/go-libp2p/core/crypto"
	crypto_pb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.yaml.in/yaml/v3"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/discovery/invite"
	"github.com/nova-node/nova-node/internal/secretfile"
)

// ApplyInvite is [ApplyInviteWith] with no options: a token's identity is
// installed only in a data dir that has none.
func ApplyInvite(dataDir string, tok invite.Token) error {
	_, err := ApplyInviteWith(dataDir, tok, JoinOptions{})
	return err
}

// JoinOptions say what joining does with a token's identity when the data
// dir has one already (a different key): by default it refuses
// ([IdentityExistsError]).
type JoinOptions struct {
	// ReplaceIdentity installs the token's identity, moving the old key to
	// identity.key.replaced.
	ReplaceIdentity bool
	// KeepIdentity keeps the data dir's identity and drops the token's
	// identity and grant (the grant is for the token's identity only).
	KeepIdentity bool
}

// JoinResult says what joining did about the authority and the identity.
type JoinResult struct {
	Authority string // the swarm's authority written to config.yaml, "" if none
	PeerID    string // the data dir's identity after joining
	// IdentityInstalled: the token's identity is the data dir's now.
	IdentityInstalled bool
	// ReplacedIdentity is where the former key went, when it was replaced.
	ReplacedIdentity string
	// Granted: the token's grant was written to config.yaml's grants.
	Granted bool
	// GrantDropped: the token's grant was dropped, with its identity
	// (KeepIdentity).
	GrantDropped bool
}

// IdentityExistsError says a token carries an identity for the joiner but
// the data dir has another one.
type IdentityExistsError struct {
	DataDir string
	Current peer.ID // the data dir's identity
	Token   peer.ID // the token's
}

func (e *IdentityExistsError) Error() string {
	return fmt.Sprintf("node: the token carries an identity (%s) with its grant, but %s has one already (%s)", e.Token, e.DataDir, e.Current)
}

// Code is the error's code.
func (e *IdentityExistsError) Code() string { return "IDENTITY_EXISTS" }

// Hint says what to do about it.
func (e *IdentityExistsError) Hint() string {
	return "join again with --replace-identity to become the granted node (the old key is kept as " + IdentityFile + ".replaced; " +
		"peers see a new node), with --keep-identity to stay this node without the grant (then ask an admin for `nova-node grant " +
		e.Current.String() + "`), or join into a fresh --data-dir"
}

// InviteError says a token's authority, identity or grant is not what it
// must be.
type InviteError struct{ Msg string }

func (e *InviteError) Error() string { return "invalid token: " + e.Msg }

// Code is the error's code.
func (e *InviteError) Code() string { return "INVALID_TOKEN" }

// Hint says what to do about it.
func (e *InviteError) Hint() string {
	return "ask the member who invited you for a new token (`nova-node invite` on their node)"
}

// ApplyInviteWith writes an invite token into the data dir's config.yaml
// (swarm, swarm secret, bootstrap peers added to those already there, the
// swarm's authority, and the token's grant appended to grants), keeping
// the file's comments. The data dir is created if needed. A token's
// identity becomes the data dir's when it has none; opts say what to do
// when it has another. Everything in the token is checked before anything
// is written. A running node must be restarted to use it.
func ApplyInviteWith(dataDir string, tok invite.Token, opts JoinOptions) (JoinResult, error) {
	var res JoinResult
	if err := tok.Validate(); err != nil {
		return res, err
	}
	var auth peer.ID
	if len(tok.Authority) > 0 {
		p, err := peer.IDFromBytes(tok.Authority)
		if err != nil {
			return res, &InviteError{Msg: fmt.Sprintf("its authority is not a peer ID: %v", err)}
		}
		auth = p
		res.Authority = p.String()
	}
	var key crypto.PrivKey
	var keyID peer.ID
	if len(tok.Identity) > 0 {
		k, err := crypto.UnmarshalPrivateKey(tok.Identity)
		if err != nil || k.Type() != crypto_pb.KeyType_Ed25519 {
			return res, &InviteError{Msg: "its identity is not an Ed25519 private key"}
		}
		key = k
		keyID, _ = peer.IDFromPrivateKey(k)
		g, err := authority.OpenGrant(tok.Grant)
		if err != nil {
			return res, &InviteError{Msg: fmt.Sprintf("its grant: %v", err)}
		}
		if g.Peer != keyID || g.Authority != auth {
			return res, &InviteError{Msg: "its grant is not for its identity in its swarm"}
		}
	}
	cur, err := LoadIdentity(dataDir)
	switch {
	case errors.Is(err, ErrNoIdentity):
		cur = nil
	case err != nil:
		return res, err
	}
	grant, install, replace := key != nil, false, false
	if key != nil {
		switch {
		case cur == nil:
			install = true
		case cur.Equals(key):
		case opts.KeepIdentity:
			grant, res.GrantDropped = false, true
		case opts.ReplaceIdentity:
			install, replace = true, true
		default:
			curID, _ := peer.IDFromPrivateKey(cur)
			return res, &IdentityExistsError{DataDir: dataDir, Current: curID, Token: keyID}
		}
	}
	// A data dir without an identity gets the token's before anything else
	// (EnsureDataDir would make one up). One with an identity to replace
	// gets its config edited first: a config that cannot be edited leaves
	// the old identity in place, and the replacement, last, cannot fail
	// halfway (the new key is created whole or not at all).
	if install && !replace {
		if _, err := InstallIdentity(dataDir, key, false); err != nil {
			return res, err
		}
		res.IdentityInstalled = true
	}
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	if _, err := EnsureDataDir(cfg); err != nil {
		return res, err
	}
	res.Granted = grant
	err = editConfig(dataDir, func(c *Config, set func(key string, v any)) {
		if auth != "" {
			set("authority", auth.String())
		}
		if grant {
			g := base64.RawURLEncoding.EncodeToString(tok.Grant)
			if !slices.Contains(c.Grants, g) {
				set("grants", append(slices.Clone(c.Grants), g))
			}
		}
		set("swarm", tok.Swarm)
		if len(tok.Secret) > 0 {
			set("swarmSecret", hex.EncodeToString(tok.Secret))
		} else {
			set("swarmSecret", "")
		}
		// Loopback addresses of another device would reach this one: a
		// token with others too gives those only.
		boot := c.Bootstrap
		for _, a := range append(invite.ForOtherDevices(tok.Bootstrap), tok.Relays...) {
			if !slices.Contains(boot, a) {
				boot = append(boot, a)
			}
		}
		set("bootstrap", boot)
		relays := c.Relays
		for _, a := range tok.Relays {
			if !slices.Contains(relays, a) {
				relays = append(relays, a)
			}
		}
		set("relays", relays)
	})
	if err != nil {
		return res, err
	}
	if replace {
		moved, err := InstallIdentity(dataDir, key, true)
		if err != nil {
			return res, err
		}
		res.IdentityInstalled, res.ReplacedIdentity = true, moved
	}
	k, err := LoadIdentity(dataDir)
	if err != nil {
		return res, err
	}
	id, _ := peer.IDFromPrivateKey(k)
	res.PeerID = id.String()
	return res, nil
}

// FoundAuthority makes the data dir's node the founder of its swarm's
// authority: its own peer ID is written as config.yaml's authority, so
// that, once restarted, it is the first admin. It returns that peer ID.
func FoundAuthority(dataDir string) (peer.ID, error) {
	key, err := LoadIdentity(dataDir)
	if err != nil {
		return "", err
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", err
	}
	return self, SetAuthority(dataDir, self)
}

// SetAuthority writes the swarm's authority (a peer ID) into config.yaml:
// the founding admin's key. A running node must be restarted to use it.
func SetAuthority(dataDir string, auth peer.ID) error {
	return editConfig(dataDir, func(_ *Config, set func(string, any)) {
		set("authority", auth.String())
	})
}

// SetSwarmSecret writes a swarm secret (hex) into config.yaml.
func SetSwarmSecret(dataDir string, secret []byte) error {
	return editConfig(dataDir, func(_ *Config, set func(string, any)) {
		set("swarmSecret", hex.EncodeToString(secret))
	})
}

// editConfig changes top-level keys of config.yaml through its node tree,
// so comments and the order of the file survive, and checks the result.
func editConfig(dataDir string, f func(c *Config, set func(key string, v any))) error {
	path := ConfigPath(dataDir)
	def := DefaultConfig()
	def.DataDir = dataDir
	if _, err := writeConfigTemplate(def); err != nil { // only when there is none
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("node: read %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("node: %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("node: %s is not a YAML mapping", path)
	}
	cur := DefaultConfig()
	cur.DataDir = dataDir
	if err := ParseConfig(b, &cur); err != nil {
		return err
	}
	var setErr error
	set := func(key string, v any) {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			setErr = err
			return
		}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				n.HeadComment = root.Content[i+1].HeadComment
				root.Content[i+1] = &n
				return
			}
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
	}
	f(&cur, set)
	if setErr != nil {
		return setErr
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	check := DefaultConfig()
	check.DataDir = dataDir
	if err := ParseConfig(out, &check); err != nil {
		return err
	}
	if err := check.Validate(); err != nil {
		return err
	}
	return secretfile.Replace(path, out) // it holds the swarm secret
}
