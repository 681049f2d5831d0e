package journal

import "golang.org/x/sys/unix"

// prefault makes the mapped pages of [off, off+n) present and writable now
// (MADV_POPULATE_WRITE, Linux 5.14 and later), so that the appends that
// reach them take no page fault: a fault on a shared file mapping costs
// several microseconds, paid by whoever appends. Best effort: an older
// kernel refuses the advice and the appends fault as before.
func (s *segment) prefault(off, n int) {
	if !s.mapped || off >= len(s.m) {
		return
	}
	start := off &^ (unix.Getpagesize() - 1)
	end := min(off+n, len(s.m))
	_ = unix.Madvise(s.m[start:end], unix.MADV_POPULATE_WRITE)
}
