package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/discovery/invite"
	"github.com/nova-node/nova-node/node"
)

// invite draws its QR code only on a terminal: into a pipe or a file it
// prints the token alone.
func TestInviteDrawsQROnlyOnATerminal(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	out, errOut, code := runCLI(t, "invite", "--data-dir", dir)
	if code != 0 || strings.ContainsAny(out, "█▀▄") || !strings.Contains(out, "nova-node join nova") {
		t.Fatalf("invite into a buffer: exit %d\n%s%s", code, out, errOut)
	}
}

// join saves the token's LAN addresses, not the inviting device's
// loopback ones (they would reach the joiner itself); a token with only
// loopback addresses (for this machine) keeps them.
func TestJoinLeavesOutOtherDevicesLoopback(t *testing.T) {
	const p = "/p2p/12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx"
	lan, loop, loop6 := "/ip4/192.168.1.20/tcp/4710"+p, "/ip4/127.0.0.1/tcp/4710"+p, "/ip6/::1/tcp/4710"+p
	for _, c := range []struct {
		boot, want []string
	}{
		{[]string{loop, lan, loop6}, []string{lan}},
		{[]string{loop, loop6}, []string{loop, loop6}},
	} {
		tok, err := invite.Token{Swarm: "lab", Bootstrap: c.boot}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, errOut, code := runCLI(t, "join", "--data-dir", dir, tok); code != 0 {
			t.Fatalf("join: exit %d %s", code, errOut)
		}
		cfg, err := node.LoadConfig(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Bootstrap, c.want) {
			t.Errorf("token with %v: bootstrap %v, want %v", c.boot, cfg.Bootstrap, c.want)
		}
	}
}
