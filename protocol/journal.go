package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nova-node/nova-node/internal/clock"
)

// Journal is a log the router writes synchronously, before Post returns and
// before an inbound channel's watermark moves on, so that a crash of the
// process at any moment loses neither an accepted envelope nor the record
// of one delivered: what the persister writes to the Store behind the
// traffic (the outbox, the watermarks) is in the journal first. The
// persister syncs it on each pass (one flush for many envelopes) and
// checkpoints it (Rotate, a full persist, release) when it fills.
// *journal.Journal (internal/journal) satisfies it.
type Journal interface {
	// Append writes one record and returns the generation it went into;
	// it must not block (a full journal fails, and the send with it, with
	// QUEUE_FULL).
	Append(rec []byte) (gen uint64, err error)
	// AppendIn writes rec only if it goes into generation gen.
	AppendIn(gen uint64, rec []byte) bool
	// NeedsRotate reports that a checkpoint is due.
	NeedsRotate() bool
	// Rotate starts a new part of the journal and returns what frees the
	// old part once the Store holds everything it says (nil: not now).
	Rotate() (release func())
	// Sync makes what was appended survive a power loss too.
	Sync() error
	// Reset discards every record: the Store holds it all.
	Reset() error
}

// WithJournal has the router write j (see [Journal]); recs are the
// records an earlier run left in it, which Start applies to the Store (see
// [ReplayJournal]) before it loads the outbox, then resets j.
func WithJournal(j Journal, recs [][]byte) Option {
	return func(o *options) error {
		if j == nil {
			return errors.New("protocol: nil journal")
		}
		o.journal, o.journalRecs = j, recs
		return nil
	}
}

// Journal record kinds.
const (
	recPut  = 'P' // channel, from, to, seq, expires (unix ms, 0: none), envelope CBOR; from and to empty after the channel's first put of a generation
	recDel  = 'D' // channel, count, seqs: settled (acknowledged, refused, failed)
	recDrop = 'X' // channel: closed, its outbox entry goes
	recMark = 'M' // inbound channel key, watermark
)

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendPutRec(b []byte, ch, from, to string, seq uint64, expires time.Time, env []byte) []byte {
	b = append(b, recPut)
	b = appendStr(b, ch)
	b = appendStr(b, from)
	b = appendStr(b, to)
	b = binary.AppendUvarint(b, seq)
	var ms int64
	if !expires.IsZero() {
		ms = expires.UnixMilli()
	}
	b = binary.AppendVarint(b, ms)
	return append(b, env...)
}

func appendDelRec(b []byte, ch string, seqs []uint64) []byte {
	b = append(b, recDel)
	b = appendStr(b, ch)
	b = binary.AppendUvarint(b, uint64(len(seqs)))
	for _, s := range seqs {
		b = binary.AppendUvarint(b, s)
	}
	return b
}

func appendDropRec(b []byte, ch string) []byte { return appendStr(append(b, recDrop), ch) }

func appendMarkRec(b []byte, key string, seq uint64) []byte {
	return binary.AppendUvarint(appendStr(append(b, recMark), key), seq)
}

// recReader decodes a record's fields, remembering the first error.
type recReader struct {
	b   []byte
	err error
}

func (r *recReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("string past the end")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// ReplayJournal applies the records a journal holds (oldest first) to s:
// the outbox changes in one SaveOutbox, in order, and each watermark where
// it is above the stored one. A record that does not decode ends the
// replay there (a damaged tail); it returns how many records it applied.
func ReplayJournal(recs [][]byte, s Store) (int, error) {
	var ops []OutboxOp
	marks := map[string]uint64{}
	n := 0
	for _, rec := range recs {
		if len(rec) == 0 {
			break
		}
		r := &recReader{b: rec[1:]}
		var op *OutboxOp
		switch rec[0] {
		case recPut:
			ch, from, to := r.str(), r.str(), r.str()
			seq, ms := r.uvarint(), r.varint()
			it := OutboxItem{Seq: seq, Env: r.b}
			if ms != 0 {
				it.Expires = time.UnixMilli(ms)
			}
			op = &OutboxOp{Channel: ch, From: from, To: to, Put: []OutboxItem{it}}
		case recDel:
			ch := r.str()
			k := r.uvarint()
			if k > uint64(len(r.b)) {
				r.err = errors.New("count past the end")
			}
			seqs := make([]uint64, 0, min(k, 1<<16))
			for i := uint64(0); i < k && r.err == nil; i++ {
				seqs = append(seqs, r.uvarint())
			}
			op = &OutboxOp{Channel: ch, Delete: seqs}
		case recDrop:
			op = &OutboxOp{Channel: r.str(), Drop: true}
		case recMark:
			key, seq := r.str(), r.uvarint()
			if r.err == nil && seq > marks[key] {
				marks[key] = seq
			}
		default:
			r.err = fmt.Errorf("unknown record kind %q", rec[0])
		}
		if r.err != nil {
			break
		}
		if op != nil {
			ops = append(ops, *op)
		}
		n++
	}
	if len(ops) > 0 {
		if err := s.SaveOutbox(ops); err != nil {
			return 0, fmt.Errorf("protocol: replay the journal's outbox: %w", err)
		}
	}
	if len(marks) > 0 {
		held, err := s.LoadWatermarks()
		if err != nil {
			return 0, fmt.Errorf("protocol: replay the journal's watermarks: %w", err)
		}
		for k, v := range marks {
			if v <= held[k] {
				delete(marks, k)
			}
		}
		if len(marks) > 0 {
			if err := s.SaveWatermarks(marks); err != nil {
				return 0, fmt.Errorf("protocol: replay the journal's watermarks: %w", err)
			}
		}
	}
	return n, nil
}

// journalAppend writes a record that only spares work after a crash (a
// settlement, a drop, a watermark): if the journal is full, the record is
// left out, and a replay may bring back an envelope the receiver's
// watermark then settles without delivering it again.
func (r *Router) journalAppend(rec []byte) {
	if _, err := r.o.journal.Append(rec); err != nil && r.journalWarned.CompareAndSwap(false, true) {
		r.log.Warnw("journal record left out (the journal is full until the next checkpoint)", "err", err)
	}
}

// journalMark records inbound channel key's watermark seq.
func (r *Router) journalMark(key string, seq uint64) {
	if r.o.journal == nil {
		return
	}
	var buf [128]byte
	r.journalAppend(appendMarkRec(buf[:0], key, seq))
}

// checkpointJournal, on the persister's pass: when the journal asks for
// it, start its next part, write everything to the Store (a full persist),
// then free the old part; and sync it (one flush for every record since
// the last sync, at most every journalSyncEvery). It reports whether the
// pass must come again soon.
func (r *Router) checkpointJournal() (again bool) {
	j := r.o.journal
	if j == nil {
		return false
	}
	if r.journalRelease == nil && j.NeedsRotate() {
		r.journalRelease = j.Rotate()
	}
	if r.journalRelease != nil {
		if _, _, err := r.persist(true); err != nil {
			r.log.Errorw("journal checkpoint failed: the outbox is not written yet", "err", err)
			return true
		}
		r.journalRelease()
		r.journalRelease = nil
		r.journalWarned.Store(false)
	}
	if now := clock.Now(); now.Sub(r.journalSyncedAt) >= journalSyncEvery {
		r.journalSyncedAt = now
		if err := j.Sync(); err != nil {
			r.log.Errorw("cannot sync the journal", "err", err)
			return true
		}
	}
	return false
}

// journalSyncEvery is how often the persister flushes the journal to stable
// storage. A process crash loses nothing journaled whenever it comes (the
// records are in the page cache); a power loss, at most this much. Each
// flush writes back every page touched since the last (on a 20 ms pass it
// cost the one-way rate a sixth).
const journalSyncEvery = time.Second
