package discovery

import (
	"testing"
	"time"
)

// A lone node's rejoin attempts start one check after it is found alone,
// then back off by doubling up to rejoinMax; a connection resets them.
func TestRejoinPaceBacksOff(t *testing.T) {
	var r rejoinPace
	t0 := time.Unix(1_700_000_000, 0)
	var attempts []time.Duration
	for s := time.Duration(0); s <= 5*time.Minute; s += rtCheckInterval {
		if r.due(true, t0.Add(s)) {
			attempts = append(attempts, s)
		}
	}
	want := []time.Duration{1, 3, 7, 15, 31, 63, 123, 183, 243}
	if len(attempts) != len(want) {
		t.Fatalf("attempts at %v, want at %v s", attempts, want)
	}
	for i, s := range want {
		if attempts[i] != s*time.Second {
			t.Fatalf("attempts at %v, want at %v s", attempts, want)
		}
	}
	if r.due(false, t0.Add(6*time.Minute)) {
		t.Fatal("an attempt while connected")
	}
	if r.due(true, t0.Add(6*time.Minute)) || !r.due(true, t0.Add(6*time.Minute+rtCheckInterval)) {
		t.Fatal("a connection did not reset the backoff")
	}
}
