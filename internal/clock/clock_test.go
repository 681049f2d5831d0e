package clock

import (
	"testing"
	"time"
)

// Now agrees with time.Now, and its results order and subtract like
// time.Now's (they carry the monotonic reading).
func TestNowFollowsTimeNow(t *testing.T) {
	for i := 0; i < 1000; i++ {
		before := time.Now()
		got := Now()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Fatalf("Now() = %v, not between %v and %v (monotonic)", got, before, after)
		}
		// The wall readings: within a millisecond, the anchor being fresh.
		if d := got.Round(0).Sub(before.Round(0)); d < -time.Millisecond || d > time.Millisecond+after.Sub(before) {
			t.Fatalf("Now()'s wall clock is %v from time.Now's", d)
		}
	}
}

func TestNowIsMonotonic(t *testing.T) {
	prev := Now()
	for i := 0; i < 100000; i++ {
		n := Now()
		if n.Before(prev) {
			t.Fatalf("Now went back: %v after %v", n, prev)
		}
		prev = n
	}
}

// An anchor older than Reanchor is replaced by the next call.
func TestNowReanchors(t *testing.T) {
	old := time.Now().Add(-2 * Reanchor)
	anchor.Store(&old)
	before := time.Now()
	got := Now()
	if a := anchor.Load(); a.Before(before) {
		t.Fatalf("anchor %v not renewed (call at %v)", a, before)
	}
	if got.Before(before) {
		t.Fatalf("Now() = %v before the call at %v", got, before)
	}
}

func BenchmarkNow(b *testing.B) {
	b.Run("clock.Now", func(b *testing.B) {
		for b.Loop() {
			_ = Now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
}
