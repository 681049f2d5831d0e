// Package secretfile reads and writes the data dir's secrets (the node's
// identity key, the local token): files that only their owner may read or
// write. It is the one home of two rules:
//
//  1. A secret file is a regular file with no group or other permission
//     bits (on Unix): [Read] refuses anything else, as a secret other users
//     could read is no longer one.
//  2. A secret file is created whole and once: [Create] writes a
//     temporary file of mode 0600 in the same directory, syncs it and links
//     it into place, so a reader never sees half a secret and, of two
//     concurrent creators, exactly one wins.
//
// Callers turn its errors into their own coded errors: the package knows
// nothing of what the secret is for.
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// ErrNotRegular is returned by [Read] for a path that is not a regular
// file (a directory, a FIFO, a device).
var ErrNotRegular = errors.New("secretfile: not a regular file")

// ModeError says a secret file lets users other than its owner in: its
// permission bits give the group or others access (Unix only).
type ModeError struct {
	Path string
	Mode fs.FileMode // the file's permission bits
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("secretfile: %s has mode %04o: other users can read or write it", e.Path, e.Mode)
}

// Read returns the contents of the secret file at path. It refuses a path
// that is not a regular file ([ErrNotRegular]) and, except on Windows, one
// whose mode has any group or other bit set (a [*ModeError]). Other errors
// are os.Stat's and os.ReadFile's, unwrapped: one wraps fs.ErrNotExist when
// there is no file, fs.ErrPermission when the caller may not read it.
func Read(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, &ModeError{Path: path, Mode: perm}
	}
	return os.ReadFile(path)
}

// Create writes data as the secret file at path, mode 0600, unless a file
// is already there: then it changes nothing and returns an error wrapping
// fs.ErrExist. The data goes to a temporary file in path's directory,
// synced and then linked to path (the link is what fails if path exists),
// and the directory is synced; the temporary file is removed in every
// case. The directory must exist.
func Create(path string, data []byte) error {
	return place(path, data, os.Link)
}

// Replace writes data as the file at path, mode 0600, replacing any file
// there: the same temporary file, synced, then renamed over path, and the
// directory synced, so that a crash leaves the old file or the new one,
// never a part. The directory must exist.
func Replace(path string, data []byte) error {
	return place(path, data, os.Rename)
}

// place writes data to a temporary file beside path, mode exactly 0600,
// syncs it, puts it at path with put (link or rename) and syncs the
// directory. The temporary file is removed in every case.
func place(path string, data []byte, put func(oldpath, newpath string) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*") // mode 0600 less the umask
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Exactly 0600, whatever the umask took away.
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := put(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a new directory entry durable, where the system allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
