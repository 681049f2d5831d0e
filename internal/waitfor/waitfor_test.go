package waitfor_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
)

func TestWithinReturnsOnceTrue(t *testing.T) {
	var calls atomic.Int32
	err := waitfor.Within(10*time.Second, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("Within = %v after %d calls, want nil after 3", err, calls.Load())
	}
}

func TestWithinReportsTheLastError(t *testing.T) {
	var calls int
	sentinel := errors.New("still wrong")
	err := waitfor.Within(20*time.Millisecond, func() error {
		calls++
		if calls == 1 {
			return errors.New("first")
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), "not true after 20ms") {
		t.Fatalf("Within = %v, want the last error after the timeout", err)
	}
}
