package protocol

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMain runs every test of the package with the lock-order checker on
// (see lockorder.go): a mutex taken against the package doc's order panics
// where it happens, and fails the run even if that panic was recovered (a
// handler's is). Benchmarks run without it: it walks the stack per Lock.
func TestMain(m *testing.M) {
	flag.Parse()
	lockOrderChecks.Store(flag.Lookup("test.bench").Value.String() == "")
	code := m.Run()
	if v := lockOrderViolations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d lock-order violations:\n%s\n", len(v), strings.Join(v, "\n"))
		code = 1
	}
	os.Exit(code)
}

// WithoutLockOrderChecks turns the lock-order checker off for the rest of
// t, its cleanups included: for the few tests that move so many envelopes
// that the checker's stack walk per Lock would take them past their
// timeouts. Call it before creating the routers, so that they are closed
// before the checker comes back on.
func WithoutLockOrderChecks(t testing.TB) {
	was := lockOrderChecks.Load()
	setLockOrderChecks(false)
	t.Cleanup(func() { setLockOrderChecks(was) })
}

// setLockOrderChecks turns the checker on or off, forgetting what it
// recorded as held: a mutex taken while it was off is not known, and one
// released while it was off must not stay held.
func setLockOrderChecks(on bool) {
	lockOrderChecks.Store(on)
	lockState.mu.Lock()
	clear(lockState.held)
	clear(lockState.holder)
	lockState.mu.Unlock()
}

// violation runs f and returns the lock-order violation it panicked with,
// or "" (taking it off the record TestMain checks).
func violation(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
			if got := lockOrderViolations(); len(got) != 1 {
				t.Errorf("recorded %d violations, want 1", len(got))
			}
		}
	}()
	f()
	return ""
}

func TestLockOrderChecker(t *testing.T) {
	defer func(w io.Writer) { lockOrderOut = w }(lockOrderOut)
	lockOrderOut = io.Discard // the violations below are on purpose
	var router orderedMutex[lockRouter]
	var ch orderedMutex[lockChannel]
	var pending, pending2 orderedMutex[lockPending]

	t.Run("in order", func(t *testing.T) {
		if msg := violation(t, func() {
			ch.Lock()
			router.Lock()
			pending.Lock()
			pending.Unlock()
			router.Unlock()
			ch.Unlock()
		}); msg != "" {
			t.Fatal(msg)
		}
	})
	t.Run("against the order", func(t *testing.T) {
		router.Lock()
		defer router.Unlock()
		msg := violation(t, func() { ch.Lock() })
		if !strings.Contains(msg, "taking outChannel.mu (rank 2) while holding Router.mu (rank 3)") {
			t.Fatalf("violation = %q", msg)
		}
	})
	t.Run("same rank", func(t *testing.T) {
		pending.Lock()
		defer pending.Unlock()
		if msg := violation(t, func() { pending2.Lock() }); msg == "" {
			t.Fatal("two mutexes of one rank nested: no violation")
		}
	})
	t.Run("try lock and unshared never wait", func(t *testing.T) {
		if msg := violation(t, func() {
			router.Lock()
			if !ch.TryLock() {
				t.Error("TryLock of a free mutex failed")
			}
			router.Unlock()
			ch.Unlock()
			router.Lock()
			ch.lockUnshared()
			router.Unlock()
			ch.Unlock()
		}); msg != "" {
			t.Fatal(msg)
		}
	})
	t.Run("held until unlocked, also by another goroutine", func(t *testing.T) {
		router.Lock()
		done := make(chan struct{})
		go func() { router.Unlock(); close(done) }()
		<-done
		if msg := violation(t, func() { ch.Lock(); ch.Unlock() }); msg != "" {
			t.Fatal(msg)
		}
	})
	t.Run("per goroutine", func(t *testing.T) {
		router.Lock()
		defer router.Unlock()
		msg := make(chan string)
		go func() { msg <- violation(t, func() { ch.Lock(); ch.Unlock() }) }()
		if m := <-msg; m != "" {
			t.Fatal(m)
		}
	})
}

// TestLockOrderTableIsTheDocs holds the package doc's lock-order table to
// the ranks the checker enforces: the same mutexes, in the same order.
func TestLockOrderTableIsTheDocs(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^//\t+(\d+)\s+(\S+)`)
	rows := row.FindAllStringSubmatch(string(src), -1)
	if len(rows) != len(lockNames)-1 {
		t.Fatalf("doc.go's table has %d rows, the code %d ranks", len(rows), len(lockNames)-1)
	}
	for i, r := range rows {
		n, _ := strconv.Atoi(r[1])
		if n != i+1 || r[2] != lockNames[i+1] {
			t.Errorf("doc.go's row %d is %s %s, the code's rank %d is %s", i+1, r[1], r[2], i+1, lockNames[i+1])
		}
	}
	// Each rank type answers its own place.
	ranks := []ranked{lockChannelSend{}, lockChannel{}, lockRouter{}, lockInStream{}, lockInChannel{}, lockOutStream{},
		lockStreamWrite{}, lockChannelEvents{}, lockRoster{}, lockPending{}, lockBounded{}, lockHandlerCtx{}, lockMemStore{}}
	if len(ranks) != len(lockNames)-1 {
		t.Fatalf("%d rank types, %d names", len(ranks), len(lockNames)-1)
	}
	for i, r := range ranks {
		if int(r.rank()) != i+1 {
			t.Errorf("%T ranks %d, want %d", r, r.rank(), i+1)
		}
	}
}
