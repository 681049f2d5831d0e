package discovery

import (
	"testing"
	"time"
)

// The kernel subscription opens without privileges and stops at once.
func TestWatchAddrsStops(t *testing.T) {
	_, stop, err := watchAddrs()
	if err != nil {
		t.Fatalf("netlink subscription: %v", err)
	}
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not end the reader")
	}
}
