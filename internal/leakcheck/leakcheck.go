// Package leakcheck finds goroutines that outlive their owners in tests: it
// reads every goroutine's stack and reports those running code under a
// package prefix, leaving out the test runner's own goroutines.
package leakcheck

import (
	"runtime"
	"strings"
	"time"
)

// notLeaks are frames of goroutines that belong to the testing package or
// to this checker.
var notLeaks = []string{
	"leakcheck.Leaked", "testing.tRunner", "testing.(*T).Run", "testing.runCleanup",
	"testing.(*B).", "testing.(*F).", "created by testing.",
}

// Leaked returns the stacks of goroutines running code whose import path
// contains prefix, "" when there are none.
func Leaked(prefix string) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, prefix) || containsAny(g, notLeaks) {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}

// Wait polls Leaked until it is empty or d has passed, giving goroutines
// time to unwind, and returns the last stacks found ("" when none).
func Wait(prefix string, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		last := Leaked(prefix)
		if last == "" || time.Now().After(deadline) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
