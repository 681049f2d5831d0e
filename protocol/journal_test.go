package protocol

import (
	"testing"
	"time"
)

// The journal's records, replayed into a store, give the outbox and the
// watermarks they describe, in order: settled envelopes gone, a dropped
// channel gone, the highest watermark kept.
func TestReplayJournal(t *testing.T) {
	exp := time.UnixMilli(1_800_000_000_000)
	recs := [][]byte{
		appendPutRec(nil, "c1", "a@p", "b@q", 1, exp, []byte{0xa1}),
		appendPutRec(nil, "c1", "", "", 2, time.Time{}, []byte{0xa2}),
		appendPutRec(nil, "c2", "a@p", "c@q", 1, time.Time{}, []byte{0xa3}),
		appendDelRec(nil, "c1", []uint64{1}),
		appendDropRec(nil, "c2"),
		appendMarkRec(nil, "q/c9", 7),
		appendMarkRec(nil, "q/c9", 5),
	}
	s := NewMemStore()
	if err := s.SaveWatermarks(map[string]uint64{"q/c8": 3}); err != nil {
		t.Fatal(err)
	}
	n, err := ReplayJournal(recs, s)
	if err != nil || n != len(recs) {
		t.Fatalf("ReplayJournal = %d, %v", n, err)
	}
	out, _ := s.LoadOutbox()
	if len(out) != 1 || out[0].ID != "c1" || out[0].From != "a@p" || out[0].To != "b@q" || len(out[0].Items) != 1 || out[0].Items[0].Seq != 2 {
		t.Fatalf("outbox after replay: %+v", out)
	}
	marks, _ := s.LoadWatermarks()
	if marks["q/c9"] != 7 || marks["q/c8"] != 3 {
		t.Fatalf("watermarks after replay: %v", marks)
	}
	// A damaged record ends the replay there.
	if n, err := ReplayJournal([][]byte{appendMarkRec(nil, "k", 1), {recPut, 0xff}, appendMarkRec(nil, "k2", 1)}, NewMemStore()); err != nil || n != 1 {
		t.Fatalf("damaged tail: %d, %v", n, err)
	}
}

// FuzzReplayJournal: no record, however damaged, makes a replay panic.
func FuzzReplayJournal(f *testing.F) {
	f.Add(appendPutRec(nil, "c", "a@p", "b@q", 1, time.Time{}, []byte{1}))
	f.Add(appendDelRec(nil, "c", []uint64{1, 2}))
	f.Add(appendDropRec(nil, "c"))
	f.Add(appendMarkRec(nil, "k", 9))
	f.Fuzz(func(t *testing.T, rec []byte) {
		_, _ = ReplayJournal([][]byte{rec, rec}, NewMemStore())
	})
}
