//go:build !linux

package journal

// prefault does nothing where the platform has no populate advice: the
// appends fault their pages in.
func (s *segment) prefault(off, n int) {}
