// Package journal is a crash-safe append log: records written with Append
// are in the operating system's page cache when Append returns, so they
// survive the process being killed at any moment (not a power loss until
// Sync). It lives in two fixed-size segments, memory-mapped where the
// platform allows (an append is a copy, no system call), each a header
// (magic, generation) and records (length, CRC-32C of the generation and
// the payload, payload). A record of an earlier generation left behind a
// reused segment fails its CRC, so reading stops at the end of what the
// current generation wrote.
//
// The owner checkpoints: when NeedsRotate says the current segment is half
// full, Rotate starts the other one; once everything the old one holds is
// saved elsewhere, the release function Rotate returned frees it. Append
// fails with ErrFull when both segments are full. Open returns
// the records of an earlier run, oldest first; Reset discards them once
// the owner has saved what they say.
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
)

// DefaultSegmentSize is the size of each of the two segments.
const DefaultSegmentSize = 32 << 20

const (
	headerSize = 16 // magic, generation
	recHeader  = 8  // length, CRC
)

var magic = [8]byte{'n', 'o', 'v', 'a', 'j', 'r', 'n', '1'}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrClosed is Append's error after Close.
var ErrClosed = errors.New("journal: closed")

// Journal is the log. Its methods are safe for concurrent use.
type Journal struct {
	mu     sync.Mutex
	segs   [2]*segment
	cur    int
	gen    uint64
	free   [2]bool // the segment holds nothing anyone needs
	dirty  bool    // appended since the last Sync
	closed bool
}

// Open opens (creating as needed) the journal in dir, with segments of
// size bytes (DefaultSegmentSize when 0), and returns the records an
// earlier run left, oldest first. The journal appends nothing until Reset.
func Open(dir string, size int) (*Journal, [][]byte, error) {
	if size <= 0 {
		size = DefaultSegmentSize
	}
	if size < headerSize+recHeader+1 {
		return nil, nil, fmt.Errorf("journal: segment size %d too small", size)
	}
	j := &Journal{}
	for i := range j.segs {
		s, err := openSegment(filepath.Join(dir, fmt.Sprintf("journal-%d", i)), size)
		if err != nil {
			j.Close()
			return nil, nil, err
		}
		j.segs[i] = s
	}
	var recs [][]byte
	first, second := j.segs[0], j.segs[1]
	if second.gen() < first.gen() {
		first, second = second, first
	}
	for _, s := range []*segment{first, second} {
		if g := s.gen(); g > 0 {
			recs = append(recs, s.records(g)...)
			j.gen = max(j.gen, g)
		}
	}
	j.closed = true // until Reset
	return j, recs, nil
}

// Reset discards every record (the owner saved what they said) and starts
// appending.
func (j *Journal) Reset() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.segs[0] == nil {
		return ErrClosed
	}
	j.segs[1].setHeader(0)
	j.gen++
	j.segs[0].setHeader(j.gen)
	j.segs[0].off = headerSize
	j.segs[0].clearNext()
	j.segs[0].prefault(headerSize, prefaultAhead)
	j.cur, j.free = 0, [2]bool{false, true}
	j.closed = false
	j.dirty = true
	return nil
}

// ErrFull is Append's error while both segments are full: the owner has
// not released the older one yet. Try again once it has.
var ErrFull = errors.New("journal: full until the owner's checkpoint")

// Append writes rec and returns the generation it went into (a new one
// starts with each segment); with both segments full it fails with ErrFull
// rather than wait (its caller may hold what the checkpoint needs).
func (j *Journal) Append(rec []byte) (gen uint64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return 0, ErrClosed
	}
	s := j.segs[j.cur]
	if len(rec) > len(s.m)-headerSize-recHeader {
		return 0, fmt.Errorf("journal: a %d-byte record is larger than a segment", len(rec))
	}
	if s.off+recHeader+len(rec) > len(s.m) {
		if !j.free[1-j.cur] {
			return 0, ErrFull
		}
		j.switchLocked()
		s = j.segs[j.cur]
	}
	s.append(j.gen, rec)
	j.dirty = true
	return j.gen, nil
}

// AppendIn writes rec only if it goes into generation gen: the journal is
// still in it and rec fits. A record that leans on an earlier one of the
// same generation (which a reader of that generation then has) uses it.
func (j *Journal) AppendIn(gen uint64, rec []byte) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.segs[j.cur]
	if j.closed || j.gen != gen || s.off+recHeader+len(rec) > len(s.m) {
		return false
	}
	s.append(j.gen, rec)
	j.dirty = true
	return true
}

// switchLocked starts appending to the other (free) segment.
func (j *Journal) switchLocked() {
	j.cur = 1 - j.cur
	j.free[j.cur] = false
	j.gen++
	s := j.segs[j.cur]
	s.setHeader(j.gen)
	s.off = headerSize
	s.clearNext()
}

// NeedsRotate reports whether the current segment is half full and the
// other one free: time to checkpoint.
func (j *Journal) NeedsRotate() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.segs[j.cur]
	return !j.closed && j.free[1-j.cur] && s.off-headerSize >= (len(s.m)-headerSize)/2
}

// Rotate starts the other segment (if it is free) and returns the function
// that frees the one it leaves, to be called once everything it holds is
// saved elsewhere; nil when the other segment is not free yet.
func (j *Journal) Rotate() (release func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || !j.free[1-j.cur] {
		return nil
	}
	old := j.cur
	j.switchLocked()
	return func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.segs[old] != nil && old != j.cur {
			j.segs[old].setHeader(0)
			j.free[old] = true
		}
	}
}

// prefaultAhead is how much of the current segment past the write
// position Reset and Sync fault in: about a second of a sporadic sender's
// records (a request and its answer take a few hundred bytes), so that its
// appends, on the request's path, find their pages present and writable
// (after each flush the kernel write-protects them again). Small, because
// the pages faulted in are written back at the next flush even if nothing
// was appended to them yet.
const prefaultAhead = 64 << 10

// Sync flushes what was appended to stable storage (a power loss then
// keeps it too): one flush for every append since the last Sync. It then
// faults in the pages the next appends will reach.
func (j *Journal) Sync() error {
	j.mu.Lock()
	if !j.dirty || j.segs[0] == nil {
		j.mu.Unlock()
		return nil
	}
	j.dirty = false
	segs := j.segs
	j.mu.Unlock()
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.sync())
	}
	j.prefault()
	return errors.Join(errs...)
}

// prefault faults in prefaultAhead bytes of the current segment from the
// write position on (see prefaultAhead).
func (j *Journal) prefault() {
	j.mu.Lock()
	if j.closed || j.segs[0] == nil {
		j.mu.Unlock()
		return
	}
	s := j.segs[j.cur]
	off := s.off
	j.mu.Unlock()
	s.prefault(off, prefaultAhead)
}

// Close releases the segments; Append fails afterwards.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	var errs []error
	for i, s := range j.segs {
		if s != nil {
			errs = append(errs, s.close())
			j.segs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// segment is one file, mapped (or, where mapping is not available, an
// in-memory copy written through).
type segment struct {
	f      *os.File
	m      []byte
	off    int
	mapped bool
}

func (s *segment) gen() uint64 {
	if [8]byte(s.m[:8]) != magic {
		return 0
	}
	return binary.LittleEndian.Uint64(s.m[8:16])
}

// setHeader marks the segment as generation g (0: holds nothing).
func (s *segment) setHeader(g uint64) {
	if g == 0 {
		clear(s.m[:headerSize])
	} else {
		copy(s.m, magic[:])
		binary.LittleEndian.PutUint64(s.m[8:16], g)
	}
	s.written(0, headerSize)
}

// clearNext zeroes the record header at off, so a reader stops there even
// before the CRC check.
func (s *segment) clearNext() {
	if s.off+recHeader <= len(s.m) {
		clear(s.m[s.off : s.off+recHeader])
		s.written(s.off, recHeader)
	}
}

func recCRC(gen uint64, rec []byte) uint32 {
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], gen)
	return crc32.Update(crc32.Update(0, crcTable, g[:]), crcTable, rec)
}

func (s *segment) append(gen uint64, rec []byte) {
	at := s.off
	binary.LittleEndian.PutUint32(s.m[at:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(s.m[at+4:], recCRC(gen, rec))
	copy(s.m[at+recHeader:], rec)
	s.off = at + recHeader + len(rec)
	s.clearNext()
	s.written(at, recHeader+len(rec))
}

// records returns copies of the records of generation gen, in order.
func (s *segment) records(gen uint64) [][]byte {
	var out [][]byte
	off := headerSize
	for off+recHeader <= len(s.m) {
		n := int(binary.LittleEndian.Uint32(s.m[off:]))
		if n == 0 || n > len(s.m)-off-recHeader {
			break
		}
		rec := s.m[off+recHeader : off+recHeader+n]
		if binary.LittleEndian.Uint32(s.m[off+4:]) != recCRC(gen, rec) {
			break
		}
		out = append(out, append([]byte(nil), rec...))
		off += recHeader + n
	}
	return out
}
