package taskswarm

import (
	"testing"
	"time"
)

// A recruiting time that is not whole milliseconds is rounded up, and the
// swarm records what its first round waits: replacement proposals read
// RecruitTimeoutMs, and 0 there means the default (30 s), not 0.5 ms.
func TestRecruitTimeoutRoundedUp(t *testing.T) {
	for _, d := range []time.Duration{500 * time.Microsecond, 1500 * time.Microsecond, 2 * time.Second} {
		want := int64((d + time.Millisecond - 1) / time.Millisecond)
		if got := recruitMillis(d); got != want {
			t.Errorf("recruitMillis(%v) = %d, want %d", d, got, want)
		}
	}
}
