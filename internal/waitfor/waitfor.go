// Package waitfor waits, in tests, for a condition to hold: it polls a
// function that reports what is still wrong, so a test waits on the event
// itself instead of sleeping for a guessed time, and a timeout says what
// never happened.
package waitfor

import (
	"fmt"
	"testing"
	"time"
)

// Poll intervals: the first poll comes right away, then the interval
// doubles from firstWait up to maxWait.
const (
	firstWait = time.Millisecond
	maxWait   = 50 * time.Millisecond
)

// Eventually calls f until it returns nil and fails t with f's last error
// when timeout passes first. Call it from the test's goroutine (it calls
// t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	if err := Within(timeout, f); err != nil {
		t.Fatal(err)
	}
}

// Within calls f until it returns nil, polling with a short, growing
// interval, and returns nil, or f's last error when timeout passes first.
// It is [Eventually] for code that has no testing.TB, such as a test's
// child process.
func Within(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	wait := firstWait
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not true after %s: %w", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, maxWait)
	}
}
