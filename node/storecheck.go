package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"os"
	"strconv"
)

// StoreDamagedError says the data dir's store cannot be opened as it is:
// it is not a bbolt file, or it is shorter than its own header says (cut
// off by a full disk, a partial copy or a restore). The node refuses to
// start rather than read past the end of the file, which would kill the
// process (SIGBUS on the memory-mapped file).
type StoreDamagedError struct {
	Path   string
	Reason string
}

func (e *StoreDamagedError) Error() string {
	return fmt.Sprintf("node: store %s is damaged: %s", e.Path, e.Reason)
}

// Code is the error's code for the CLI and the API.
func (e *StoreDamagedError) Code() string { return "STORE_DAMAGED" }

// Hint says what to do about it.
func (e *StoreDamagedError) Hint() string {
	return "restore " + StoreFile + " from a backup, or move it away to start with an empty store " +
		"(the identity and config.yaml are kept; published cards, replicated documents, tasks and " +
		"undelivered messages of this node are lost)"
}

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common): a 16-byte
// page header, then magic, version, page size and flags (4 bytes each),
// the root bucket (8+8), the freelist page, the high-water page id, the
// transaction id and an FNV-64a checksum of everything before it, in the
// machine's byte order.
const (
	boltPageHeader = 16
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltMetaLen    = 64
)

type boltMeta struct {
	pageSize uint32
	hwm      uint64 // pages the file must hold
	txid     uint64
}

// readBoltMeta decodes the meta page at off; ok is false when there is
// none there (short file, wrong magic, version or checksum).
func readBoltMeta(f io.ReaderAt, off int64) (m boltMeta, ok bool) {
	var b [boltPageHeader + boltMetaLen]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return m, false
	}
	meta := b[boltPageHeader:]
	o := binary.NativeEndian
	if o.Uint32(meta[0:]) != boltMagic || o.Uint32(meta[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(meta[:56])
	if h.Sum64() != o.Uint64(meta[56:]) {
		return m, false
	}
	m = boltMeta{pageSize: o.Uint32(meta[8:]), hwm: o.Uint64(meta[40:]), txid: o.Uint64(meta[48:])}
	return m, m.pageSize >= 512 && m.pageSize <= 1<<24
}

// checkStoreFile refuses a store file that bbolt would map past its end.
// It reads the two meta pages as bbolt does, picks the one bbolt would
// use (the valid one with the higher transaction id) and checks that the
// file holds every page up to that meta's high-water mark. A missing or
// empty file is fine (bbolt creates it); one with no valid meta page is
// left to bbolt, which refuses it with an error of its own.
func checkStoreFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return nil // bbolt reports it, with its own wording
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 || !fi.Mode().IsRegular() {
		return nil
	}
	// The metas are read before the size that is compared with them: a
	// node running on this store (the lock is not held yet) only grows
	// the file, so a transaction it commits meanwhile cannot make a
	// sound store look cut off.
	m0, ok0 := readBoltMeta(f, 0)
	var m1 boltMeta
	ok1 := false
	if ok0 {
		m1, ok1 = readBoltMeta(f, int64(m0.pageSize))
	} else {
		// The first page is damaged: bbolt looks for the second at each
		// page size it supports.
		for s := int64(1024); s <= 1<<24 && s < fi.Size(); s <<= 1 {
			if m1, ok1 = readBoltMeta(f, s); ok1 && int64(m1.pageSize) == s {
				break
			}
			ok1 = false
		}
	}
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return nil
	}
	if fi, err = f.Stat(); err != nil {
		return nil
	}
	size := uint64(fi.Size())
	if m.hwm > size/uint64(m.pageSize) { // hwm*pageSize > size, without overflow
		want := "more"
		if hi, lo := bits.Mul64(m.hwm, uint64(m.pageSize)); hi == 0 {
			want = strconv.FormatUint(lo, 10)
		}
		return &StoreDamagedError{Path: path, Reason: fmt.Sprintf(
			"the file is %d bytes but its last transaction wrote %s (it was cut off)", size, want)}
	}
	return nil
}
