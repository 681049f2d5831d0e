package main

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node/localapi"
)

func TestReachLine(t *testing.T) {
	const relay = "12D3KooWRDwca7FCvuczA5GAEZAyivH4CUFiJbV3XQkegHhkZzX2"
	for _, tc := range []struct {
		r    localapi.Reach
		want string
	}{
		{localapi.Reach{Reachable: []string{"/ip4/198.18.0.2/udp/4710/quic-v1"}, Relaying: true},
			"reach    public: /ip4/198.18.0.2/udp/4710/quic-v1; relaying for peers behind NAT"},
		{localapi.Reach{ReachedAt: []string{"/ip4/198.18.0.2/tcp/4710"}, Relaying: true},
			"reach    public: /ip4/198.18.0.2/tcp/4710 (a peer on the internet connected to it; AutoNAT not confirmed yet); relaying for peers behind NAT"},
		{localapi.Reach{RelayAddrs: []string{
			"/ip4/198.18.0.2/tcp/4710/p2p/" + relay + "/p2p-circuit/p2p/12D3KooWE2VL2ETADGN4awk8eGCjtK7Ja4hrcTCiayfzeueLbQ4T",
			"/ip4/198.18.0.2/udp/4710/quic-v1/p2p/" + relay + "/p2p-circuit/p2p/12D3KooWE2VL2ETADGN4awk8eGCjtK7Ja4hrcTCiayfzeueLbQ4T"}},
			"reach    behind NAT: through relay " + relay + " (peers"},
		{localapi.Reach{Unreachable: []string{"/ip4/198.18.1.1/udp/4710/quic-v1"}}, "reach    behind NAT, no relay"},
		{localapi.Reach{}, "reach    no public address confirmed"},
	} {
		if got := reachLine(tc.r); !strings.HasPrefix(got, tc.want) {
			t.Errorf("reachLine(%+v) = %q, want it to start with %q", tc.r, got, tc.want)
		}
	}
}
