package node_test

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
)

// A second node told to listen on the TCP port of a running one is refused
// with a message that says so: libp2p binds with SO_REUSEPORT, so without
// the check the two would share the port silently (a dial to one could
// reach the other).
func TestPortInUseIsRefused(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := func() node.Config {
		c := node.DefaultConfig()
		c.DataDir = t.TempDir()
		c.Listen = []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(port)}
		c.APISocket = filepath.Join(t.TempDir(), "api.sock")
		c.MDNS = false
		return c
	}
	first, err := node.New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, err := node.New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	err = second.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second node on the same port: %v, want a refusal naming the port in use", err)
	}
}

// Port 0 (any free port) gives WebSocket an ephemeral port too, not port 1.
// (Only the strings are compared: nothing listens.)
func TestDefaultListenPortZero(t *testing.T) {
	ws := func(addrs []string) []string {
		var out []string
		for _, a := range addrs {
			if strings.HasSuffix(a, "/ws") {
				out = append(out, a[strings.LastIndex(a, "/tcp/"):])
			}
		}
		return out
	}
	if got := ws(node.DefaultListen(0)); !slices.Equal(got, []string{"/tcp/0/ws"}) {
		t.Fatalf("DefaultListen(0) WebSocket addresses %v, want port 0", got)
	}
	if got := ws(node.DefaultListen(4710)); !slices.Equal(got, []string{"/tcp/4711/ws"}) {
		t.Fatalf("DefaultListen(4710) WebSocket addresses %v, want port 4711", got)
	}
}
