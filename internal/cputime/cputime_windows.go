package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and kernel) this process has used so far,
// or 0 if the system does not say.
func Process() time.Duration {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var creation, exit, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &creation, &exit, &kernel, &user) != nil {
		return 0
	}
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) } // 100 ns units
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
