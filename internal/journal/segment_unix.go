//go:build unix

package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openSegment maps the file at path, created (mode 0600) or grown to size.
func openSegment(path string, size int) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != int64(size) {
		if err == nil {
			err = f.Truncate(int64(size))
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: size %s: %w", path, err)
		}
	}
	// Pages are faulted in as appends reach them, not all at the start: a
	// node that sends little touches little of its journal.
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: map %s: %w", path, err)
	}
	return &segment{f: f, m: m, mapped: true}, nil
}

// written: the mapping is the file; nothing to do.
func (s *segment) written(off, n int) {}

func (s *segment) sync() error {
	if err := unix.Msync(s.m, unix.MS_SYNC); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	return nil
}

func (s *segment) close() error {
	err := unix.Munmap(s.m)
	s.m = nil
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
