package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/node"
)

func TestIdentityIsCreatedOnceWithMode0600(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// Concurrent first starts end with one identity.
	var wg sync.WaitGroup
	ids := make([]peer.ID, 8)
	created := make([]bool, 8)
	for i := range ids {
		wg.Go(func() {
			k, c, err := node.EnsureIdentity(dir)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], _ = peer.IDFromPrivateKey(k)
			created[i] = c
		})
	}
	wg.Wait()
	n := 0
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("two identities: %s and %s", ids[0], ids[i])
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d callers think they created the key", n)
	}
	st, err := os.Stat(filepath.Join(dir, node.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Fatalf("identity mode %v", st.Mode().Perm())
	}
	if d, _ := os.Stat(dir); runtime.GOOS != "windows" && d.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v", d.Mode().Perm())
	}
	// init again: same key.
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	if c, err := node.EnsureDataDir(cfg); err != nil || c {
		t.Fatalf("second init: created=%v err=%v", c, err)
	}
	k, err := node.LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := peer.IDFromPrivateKey(k); id != ids[0] {
		t.Fatal("init replaced the identity")
	}
}

func TestIdentityRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := node.LoadIdentity(dir); !errors.Is(err, node.ErrNoIdentity) {
		t.Fatalf("missing: %v", err)
	}
	if _, _, err := node.EnsureIdentity(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, node.IdentityFile)
	if runtime.GOOS != "windows" {
		os.Chmod(path, 0o644)
		_, err := node.LoadIdentity(dir)
		var bad *node.IdentityInvalidError
		if !errors.As(err, &bad) || !bad.Readable || bad.Code() != "IDENTITY_INVALID" || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("world-readable key: %v", err)
		}
		os.Chmod(path, 0o600)
	}
	os.WriteFile(path, []byte("garbage"), 0o600)
	_, err := node.LoadIdentity(dir)
	var bad *node.IdentityInvalidError
	if !errors.As(err, &bad) || bad.Readable || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(bad.Hint(), "backup") {
		t.Fatalf("corrupt key: %v", err)
	}
}

func TestSecondNodeOnTheSameDataDirIsRefused(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n1, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	_, err = node.New(cfg)
	var inUse *node.DataDirInUseError
	if !errors.As(err, &inUse) || inUse.Code() != "DATA_DIR_IN_USE" || !strings.Contains(err.Error(), "another nova-node") {
		t.Fatalf("got %v, want a clear 'data dir in use' error", err)
	}
}

func TestCloseBeforeStartAndTwice(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// New builds every part and listens nowhere.
	if n.Host() == nil || n.Router() == nil || n.Docs() == nil {
		t.Fatal("New left a part unbuilt")
	}
	for _, a := range n.Host().Network().ListenAddresses() {
		if a.String() != "/p2p-circuit" { // the relay transport's, no socket
			t.Fatalf("New listens on %v", a)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// A data dir whose identity.key went missing (deleted, or not copied with
// the rest) is refused: a new key would silently make it a new node to
// every peer.
func TestLostIdentityIsRefused(t *testing.T) {
	dir := t.TempDir()
	k, created, err := node.EnsureIdentity(dir)
	if err != nil || !created || k == nil {
		t.Fatalf("first EnsureIdentity: created %v, %v", created, err)
	}
	if err := os.WriteFile(filepath.Join(dir, node.StoreFile), []byte("a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, node.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	_, created, err = node.EnsureIdentity(dir)
	var lost *node.IdentityLostError
	if !errors.As(err, &lost) || created {
		t.Fatalf("EnsureIdentity without its key: created %v, %v; want an IdentityLostError", created, err)
	}
	if lost.Code() != "IDENTITY_LOST" || !strings.Contains(lost.Hint(), "restore") {
		t.Fatalf("code %q, hint %q", lost.Code(), lost.Hint())
	}
	if _, err := os.Stat(filepath.Join(dir, node.IdentityFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a new key was written anyway")
	}
	// Moving the store away starts over as a new node.
	if err := os.Rename(filepath.Join(dir, node.StoreFile), filepath.Join(dir, "old.db")); err != nil {
		t.Fatal(err)
	}
	if _, created, err := node.EnsureIdentity(dir); err != nil || !created {
		t.Fatalf("with the store moved away: created %v, %v", created, err)
	}
}
