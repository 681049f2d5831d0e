package leakcheck_test

import (
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/leakcheck"
)

func parked(started, stop chan struct{}) {
	close(started)
	<-stop
}

func TestFindsAndForgets(t *testing.T) {
	started, stop := make(chan struct{}), make(chan struct{})
	go parked(started, stop)
	<-started
	if got := leakcheck.Leaked("internal/leakcheck_test.parked"); got == "" {
		t.Fatal("a running goroutine was not reported")
	}
	close(stop)
	if got := leakcheck.Wait("internal/leakcheck_test.parked", 5*time.Second); got != "" {
		t.Fatalf("a finished goroutine is still reported:\n%s", got)
	}
	if got := leakcheck.Leaked("internal/leakcheck"); got != "" {
		t.Fatalf("the test's own goroutine or the checker was reported:\n%s", got)
	}
}
