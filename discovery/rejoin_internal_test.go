package discovery

import (
	"testing"
	"time"
)

// A lone node's rejoin attempts start one check after it is found alone,
// then back off by doubling up to rejoinMax; a connection resets them and
// is reported once as the node being back.
func TestRejoinPaceBacksOff(t *testing.T) {
	var r rejoinPace
	t0 := time.Unix(1_700_000_000, 0)
	if attempt, back := r.update(false, t0); attempt || back {
		t.Fatal("a node connected from the start is neither rejoining nor back")
	}
	var attempts []time.Duration
	for s := time.Duration(0); s <= 5*time.Minute; s += rtCheckInterval {
		attempt, back := r.update(true, t0.Add(s))
		if back {
			t.Fatal("back while alone")
		}
		if attempt {
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
	if r.attempts != len(want) {
		t.Fatalf("%d attempts counted, want %d", r.attempts, len(want))
	}
	now := t0.Add(6 * time.Minute)
	if attempt, back := r.update(false, now); attempt || !back {
		t.Fatalf("connected after being alone: attempt %v, back %v; want back", attempt, back)
	}
	if _, back := r.update(false, now.Add(rtCheckInterval)); back {
		t.Fatal("back reported twice")
	}
	if attempt, _ := r.update(true, now.Add(2*rtCheckInterval)); attempt {
		t.Fatal("an attempt at once after being found alone")
	}
	if attempt, _ := r.update(true, now.Add(3*rtCheckInterval)); !attempt || r.attempts != 1 {
		t.Fatalf("a connection did not reset the backoff (%d attempts counted)", r.attempts)
	}
}
