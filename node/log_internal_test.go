package node

import (
	"fmt"
	"testing"
)

// zeroconf's raw "[zeroconf] no suitable IPv4 interface" lines (printed
// with the standard log package in a namespace with only lo) go to debug:
// discovery's "mDNS unavailable" warning says it once.
func TestStdLogZeroconfQuiet(t *testing.T) {
	var lines []string
	w := &stdLogWriter{log: func(debug bool, msg string) {
		if !debug {
			lines = append(lines, msg)
		}
	}}
	for range 3 {
		fmt.Fprintf(w, "[zeroconf] no suitable IPv4 interface: udp4: failed to join any of these interfaces: [lo]\n")
		fmt.Fprintf(w, "[zeroconf] no suitable IPv6 interface: udp6: failed to join any of these interfaces: [lo]\n")
	}
	fmt.Fprintf(w, "something else\n")
	if len(lines) != 1 || lines[0] != "something else" {
		t.Fatalf("logged %q", lines)
	}
}
