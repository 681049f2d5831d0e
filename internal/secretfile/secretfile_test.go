package secretfile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/nova-node/nova-node/internal/secretfile"
)

func TestCreateThenRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if _, err := secretfile.Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read before Create: %v, want fs.ErrNotExist", err)
	}
	if err := secretfile.Create(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	if err := secretfile.Create(path, []byte("two")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Create: %v, want fs.ErrExist", err)
	}
	if b, err := secretfile.Read(path); err != nil || string(b) != "one" {
		t.Errorf("Read %q (%v), want the first content", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d files, want the secret only (no temporary file left)", len(entries))
	}
}

// TestCreateOneWinner: of concurrent creators, exactly one succeeds and
// the file holds its content whole.
func TestCreateOneWinner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = secretfile.Create(path, []byte(fmt.Sprintf("content %d", i))) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("creators %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fs.ErrExist):
			t.Errorf("creator %d: %v, want fs.ErrExist", i, err)
		}
	}
	if b, err := secretfile.Read(path); err != nil || string(b) != fmt.Sprintf("content %d", winner) {
		t.Errorf("Read %q (%v), want the winner's (%d) content", b, err, winner)
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := secretfile.Read(dir); !errors.Is(err, secretfile.ErrNotRegular) {
		t.Errorf("a directory: %v, want ErrNotRegular", err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o620, 0o602, 0o610, 0o601} {
		path := filepath.Join(dir, fmt.Sprintf("secret-%04o", mode))
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		var me *secretfile.ModeError
		if _, err := secretfile.Read(path); !errors.As(err, &me) || me.Mode != mode || me.Path != path {
			t.Errorf("mode %04o: %v, want a ModeError naming the path and mode", mode, err)
		}
	}
	for _, mode := range []fs.FileMode{0o600, 0o400} {
		path := filepath.Join(dir, fmt.Sprintf("ok-%04o", mode))
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if b, err := secretfile.Read(path); err != nil || string(b) != "x" {
			t.Errorf("mode %04o: %q, %v, want the content", mode, b, err)
		}
	}
}

// TestReplace: Replace writes over a file that is there (a world-readable
// one included: the new file is 0600) and leaves no temporary file.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := secretfile.Replace(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, err := secretfile.Read(path); err != nil || string(b) != "new" {
		t.Fatalf("Read %q (%v), want the new content", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d files, want the file only (no temporary file left)", len(entries))
	}
}
