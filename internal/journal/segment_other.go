//go:build !unix

package journal

import (
	"fmt"
	"io"
	"os"
)

// openSegment reads the file at path (created, mode 0600, or grown to
// size) into memory; every append is written through.
func openSegment(path string, size int) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: size %s: %w", path, err)
	}
	m := make([]byte, size)
	if _, err := io.ReadFull(f, m); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	}
	return &segment{f: f, m: m}, nil
}

func (s *segment) written(off, n int) { _, _ = s.f.WriteAt(s.m[off:off+n], int64(off)) }

func (s *segment) sync() error { return s.f.Sync() }

func (s *segment) close() error { return s.f.Close() }
