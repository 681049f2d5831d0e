package journal_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/nova-node/nova-node/internal/journal"
)

func open(t *testing.T, dir string, size int) (*journal.Journal, []string) {
	t.Helper()
	j, recs, err := journal.Open(dir, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	var out []string
	for _, r := range recs {
		out = append(out, string(r))
	}
	return j, out
}

func appendAll(t *testing.T, j *journal.Journal, recs ...string) {
	t.Helper()
	for _, r := range recs {
		if _, err := j.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
}

// What a run appended is what the next run reads back, whether the first
// closed the journal or simply stopped (its mapping's pages are the
// file's); after Reset, nothing of it is read again, even where the new
// run's records are shorter than the old ones they overwrite.
func TestRecordsSurviveAndResetForgets(t *testing.T) {
	dir := t.TempDir()
	j, got := open(t, dir, 4096)
	if len(got) != 0 {
		t.Fatalf("a new journal holds %q", got)
	}
	if _, err := j.Append([]byte("x")); err == nil {
		t.Fatal("Append before Reset succeeded")
	}
	j.Reset()
	appendAll(t, j, "alpha", "beta", "gamma")
	// No Close: a second open of the same files sees the records.
	_, got = open(t, dir, 4096)
	if !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("read back %q", got)
	}
	j.Close()
	j, got = open(t, dir, 4096)
	if !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("after Close, read back %q", got)
	}
	j.Reset()
	appendAll(t, j, "z")
	j.Close()
	_, got = open(t, dir, 4096)
	if !slices.Equal(got, []string{"z"}) {
		t.Fatalf("after Reset and one record, read back %q", got)
	}
}

// Rotation: records before and after a Rotate are read back oldest first
// while the old segment is not released; once released, only the new
// segment's are. When both segments are full, Append fails with ErrFull.
func TestRotateAndRelease(t *testing.T) {
	dir := t.TempDir()
	j, _ := open(t, dir, 256)
	j.Reset()
	for i := 0; !j.NeedsRotate(); i++ {
		appendAll(t, j, fmt.Sprintf("old%02d", i))
	}
	release := j.Rotate()
	if release == nil || j.Rotate() != nil {
		t.Fatal("Rotate: want one release, then nil while it is pending")
	}
	appendAll(t, j, "new")
	_, got := open(t, dir, 256)
	if len(got) < 2 || got[0] != "old00" || got[len(got)-1] != "new" {
		t.Fatalf("before release: %q", got)
	}
	release()
	_, got = open(t, dir, 256)
	if !slices.Equal(got, []string{"new"}) {
		t.Fatalf("after release: %q", got)
	}
	// Both segments full: Append says so instead of waiting; a release
	// makes room.
	var full error
	for i := 0; full == nil; i++ {
		if j.NeedsRotate() {
			if rel := j.Rotate(); rel == nil {
				t.Fatal("the old segment was released: Rotate must succeed")
			}
		}
		_, full = j.Append([]byte(fmt.Sprintf("fill%03d", i)))
		if i > 100 {
			t.Fatal("never full")
		}
	}
	if full != journal.ErrFull {
		t.Fatalf("Append with both segments full: %v, want ErrFull", full)
	}
}

// A record whose bytes were damaged ends what is read back there.
func TestDamagedRecordEndsTheLog(t *testing.T) {
	dir := t.TempDir()
	j, _ := open(t, dir, 4096)
	j.Reset()
	appendAll(t, j, "one", "two", "three")
	j.Close()
	// Damage "two"'s payload through a fresh mapping of the file.
	damage(t, dir, "two")
	_, got := open(t, dir, 4096)
	if !slices.Equal(got, []string{"one"}) {
		t.Fatalf("read back %q, want only the record before the damage", got)
	}
}

// AppendIn writes only into the generation it names.
func TestAppendIn(t *testing.T) {
	dir := t.TempDir()
	j, _ := open(t, dir, 4096)
	j.Reset()
	gen, err := j.Append([]byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	if !j.AppendIn(gen, []byte("same")) {
		t.Fatal("AppendIn of the current generation failed")
	}
	j.Rotate()
	if j.AppendIn(gen, []byte("stale")) {
		t.Fatal("AppendIn of an older generation succeeded")
	}
	_, got := open(t, dir, 4096)
	if !slices.Equal(got, []string{"meta", "same"}) {
		t.Fatalf("read back %q", got)
	}
}

// The pages Sync faults in ahead of the write position hold nothing a
// reader takes for a record: a journal reopened after appends, a Sync and
// more appends returns exactly the records appended.
func TestSyncPrefaultKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	j, _, err := journal.Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Reset(); err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := range 300 {
		rec := bytes.Repeat([]byte{byte(i)}, 100+i)
		if _, err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
		if i%50 == 0 {
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, got, err := journal.Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(got) != len(want) {
		t.Fatalf("reopened journal has %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}
