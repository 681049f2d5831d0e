package node

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/nova-node/nova-node/internal/secretfile"
)

// IdentityFile is the node's private key inside the data dir.
const IdentityFile = "identity.key"

// ErrNoIdentity is returned by LoadIdentity when the data dir has no key.
var ErrNoIdentity = errors.New("node: no identity in data dir (run `nova-node init`)")

// LoadIdentity reads the Ed25519 key of a data dir. A key file readable by
// other users is refused on Unix: the key is the node's identity.
func LoadIdentity(dataDir string) (crypto.PrivKey, error) {
	path := filepath.Join(dataDir, IdentityFile)
	b, err := secretfile.Read(path)
	var me *secretfile.ModeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ErrNoIdentity
	case errors.As(err, &me):
		return nil, &IdentityInvalidError{Path: path, Readable: true, Mode: me.Mode}
	case err != nil:
		return nil, fmt.Errorf("node: identity: %w", err)
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, &IdentityInvalidError{Path: path, Err: err}
	}
	return k, nil
}

// IdentityLostError says the data dir has a store but no identity key: the
// key was deleted or not copied with the rest. A new key would make this a
// new node to every peer (a new peer ID, its agents new addresses, its
// invites and channels void), so the node refuses to make one.
type IdentityLostError struct {
	DataDir string
}

func (e *IdentityLostError) Error() string {
	return fmt.Sprintf("node: %s has a store (%s) but no %s: the node's identity is missing",
		e.DataDir, StoreFile, IdentityFile)
}

// Code is the error's code for the CLI and the API.
func (e *IdentityLostError) Code() string { return "IDENTITY_LOST" }

// Hint says what to do about it.
func (e *IdentityLostError) Hint() string {
	return "restore " + IdentityFile + " from a backup of this data dir; to start over as a new node " +
		"instead, move " + StoreFile + " away (its cards, documents, tasks and undelivered messages belong to the old identity)"
}

// EnsureIdentity loads the data dir's key, creating it (mode 0600) if it does
// not exist. It never overwrites an existing key: creation is exclusive, so
// two concurrent inits end with one key. created reports a new key. A data
// dir with a store but no key is refused ([IdentityLostError]).
func EnsureIdentity(dataDir string) (k crypto.PrivKey, created bool, err error) {
	k, err = LoadIdentity(dataDir)
	if !errors.Is(err, ErrNoIdentity) {
		return k, false, err
	}
	if st, err := os.Stat(filepath.Join(dataDir, StoreFile)); err == nil && st.Size() > 0 {
		return nil, false, &IdentityLostError{DataDir: dataDir}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("node: create data dir: %w", err)
	}
	k, _, err = crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	if err := writeIdentity(dataDir, k); err != nil {
		if errors.Is(err, fs.ErrExist) {
			k, err := LoadIdentity(dataDir)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}

// writeIdentity writes key as the data dir's identity, mode 0600, created
// whole and once by [secretfile.Create]: a crash never leaves a
// half-written key, and it fails (matching [fs.ErrExist]) if a key is there
// already.
func writeIdentity(dataDir string, key crypto.PrivKey) error {
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return err
	}
	if err := secretfile.Create(filepath.Join(dataDir, IdentityFile), b); err != nil {
		return fmt.Errorf("node: write identity: %w", err)
	}
	return nil
}

// InstallIdentity writes key as the data dir's identity (mode 0600, as
// EnsureIdentity writes a new one). An existing identity is kept unless
// replace: then it is moved to identity.key.replaced (overwriting an older
// one there), so that the node it was can still be restored. It returns
// the path of the moved key, "" when there was none.
func InstallIdentity(dataDir string, key crypto.PrivKey, replace bool) (moved string, err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("node: create data dir: %w", err)
	}
	path := filepath.Join(dataDir, IdentityFile)
	if _, err := os.Stat(path); err == nil {
		if !replace {
			return "", fmt.Errorf("node: %s exists: %w", path, fs.ErrExist)
		}
		moved = path + ".replaced"
		if err := os.Rename(path, moved); err != nil {
			return "", fmt.Errorf("node: move the old identity aside: %w", err)
		}
	}
	return moved, writeIdentity(dataDir, key)
}
