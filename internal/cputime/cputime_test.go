package cputime

import "testing"

// Busy work moves the process's CPU time forward.
func TestProcessCPUAdvances(t *testing.T) {
	before := Process()
	x := 0
	for i := range 50_000_000 {
		x ^= i * i
	}
	after := Process()
	if after <= before {
		t.Fatalf("CPU time %s then %s after busy work (%d)", before, after, x)
	}
}
