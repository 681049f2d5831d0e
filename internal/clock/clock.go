// Package clock reads the time for the message path at half the cost of
// time.Now.
//
// time.Now reads two clocks (the wall clock and the monotonic one), about
// 42 ns each time on the project's VMs; a round trip between two nodes
// read it some twenty times. [Now] reads only the monotonic clock and adds
// it to a wall-clock anchor taken at most [Reanchor] before, so its result
// follows the wall clock's rate (NTP slews both clocks alike) and catches
// up with a step of the wall clock (a manual change, an NTP step) within
// Reanchor. Its results carry a monotonic reading, so durations and
// comparisons between them, or with time.Now's results, are exact.
//
// The monotonic clock does not advance while the machine is suspended (or
// a VM paused): for up to Reanchor after such a pause, Now lags the wall
// clock by the pause, as after a step of the wall clock.
//
// Use Now for event times, envelope timestamps, latencies and deadlines on
// hot paths; use time.Now where a wall time must be exact to the
// millisecond right after the system clock was set.
package clock

import (
	"sync/atomic"
	"time"
)

// Reanchor is how often Now reads the wall clock again.
const Reanchor = time.Second

var anchor atomic.Pointer[time.Time]

func init() {
	t := time.Now()
	anchor.Store(&t)
}

// Now returns the current time: a wall-clock anchor at most Reanchor old
// plus the monotonic time elapsed since it.
func Now() time.Time {
	a := anchor.Load()
	d := time.Since(*a) // the monotonic clock alone
	if d >= Reanchor || d < 0 {
		t := time.Now()
		anchor.Store(&t)
		return t
	}
	return a.Add(d)
}
