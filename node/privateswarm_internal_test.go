package node

import (
	"strings"
	"testing"
)

// The QUIC warning of a private swarm is for QUIC addresses someone named:
// the default list (every start of a joined node) does not repeat what
// join said.
func TestDefaultListen(t *testing.T) {
	for listen, want := range map[string]bool{
		strings.Join(DefaultListen(4710), " "):              true,
		strings.Join(DefaultListen(0), " "):                 true,
		strings.Join(DefaultListen(4720), " "):              true,
		"/ip4/127.0.0.1/tcp/0 /ip4/127.0.0.1/udp/0/quic-v1": false,
		"": false,
	} {
		if got := defaultListen(strings.Fields(listen)); got != want {
			t.Errorf("defaultListen(%q) = %v", listen, got)
		}
	}
}
