//go:build !windows

package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and system) this process has used so far,
// or 0 if the system does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
