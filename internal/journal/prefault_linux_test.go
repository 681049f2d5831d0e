package journal

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// After Reset, and after each Sync, the appends that reach the next
// prefaultAhead bytes take no page fault: their pages are present and
// writable already. Counted with the thread's minor faults.
func TestPrefaultAhead(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's shadow memory faults on every first write")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	j, _, err := Open(t.TempDir(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	faults := func() int64 {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			t.Skipf("getrusage: %v", err)
		}
		return ru.Minflt
	}
	rec := make([]byte, 1000)
	fill := func() int64 { // appends about prefaultAhead bytes; the faults they took
		before := faults()
		for range prefaultAhead/(len(rec)+recHeader) - 1 {
			if _, err := j.Append(rec); err != nil {
				t.Fatal(err)
			}
		}
		return faults() - before
	}
	pages := int64(prefaultAhead / unix.Getpagesize())
	if err := j.Reset(); err != nil {
		t.Fatal(err)
	}
	if n := fill(); n >= pages/2 {
		if err := unix.Madvise(j.segs[0].m[:unix.Getpagesize()], unix.MADV_POPULATE_WRITE); err != nil {
			t.Skipf("the kernel refuses MADV_POPULATE_WRITE (before Linux 5.14): %v", err)
		}
		t.Fatalf("appends after Reset took %d page faults over %d pages", n, pages)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := fill(); n >= pages/2 {
		t.Fatalf("appends after Sync took %d page faults over %d pages", n, pages)
	}
}
