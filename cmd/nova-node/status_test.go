package main

import (
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
)

// TestFormatEventNamesThePeer: the text form of an event that no agent
// address places (cards received, a security event on a malformed frame)
// says which peer it came from and what happened; a security event names
// the peer even when it has a (claimed) sender; a node-level event reads
// "type detail", not "type : detail".
func TestFormatEventNamesThePeer(t *testing.T) {
	p, err := peer.Decode("12D3KooWQkwHhGMHT4cVonXFECkPmn23L6LmpQLJtEu3FjKxG2WX")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cases := []struct {
		e         protocol.Event
		want, not []string
	}{
		{e: protocol.Event{Type: protocol.EventCardsReceived, Time: now, Peer: p, Success: true, Detail: "2 new or updated cards", SourceTier: -1, TargetTier: -1},
			want: []string{"cards-received", "peer " + p.String(), ": 2 new or updated cards"}},
		{e: protocol.Event{Type: protocol.EventSecurity, Time: now, Peer: p, Code: "PROTOCOL_ERROR", Detail: "bad frame", SourceTier: -1, TargetTier: -1},
			want: []string{"peer " + p.String(), "PROTOCOL_ERROR: bad frame"}},
		{e: protocol.Event{Type: protocol.EventSecurity, Time: now, Peer: p, Sender: "mallory@12D3KooWGcMQNpQQ9hKadKDs328GGAdLbFSwA8xFgCsHH6AMBhc6", Recipient: "alice@12D3KooWLRripXav4U71ekvfGCdbHHQH3HCXr2gR23TzkzN2YrTt",
			MessageType: "request", Code: "UNAUTHORIZED_SENDER", Detail: "not hosted by the peer"},
			want: []string{"mallory@", "-> alice@", "peer " + p.String(), "UNAUTHORIZED_SENDER: not hosted by the peer"}},
		{e: protocol.Event{Type: node.EvtPeerGone, Time: now, Peer: p, Success: true, Detail: p.String() + " left: its running sub-tasks are reassigned"},
			want: []string{"peer-gone        " + p.String() + " left"}, not: []string{" : ", "peer " + p.String()}},
		{e: protocol.Event{Type: protocol.EventMessageReceived, Time: now, Peer: p, Sender: "bob@12D3KooWQkwHhGMHT4cVonXFECkPmn23L6LmpQLJtEu3FjKxG2WX", Recipient: "alice@12D3KooWGcMQNpQQ9hKadKDs328GGAdLbFSwA8xFgCsHH6AMBhc6", MessageType: "response", Path: "remote", Success: true},
			not: []string{"peer "}},
	}
	for _, c := range cases {
		line := formatEvent(c.e)
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s event: %q lacks %q", c.e.Type, line, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(line, n) {
				t.Errorf("%s event: %q has %q", c.e.Type, line, n)
			}
		}
		if strings.HasSuffix(line, " ") {
			t.Errorf("%s event: %q ends in a space", c.e.Type, line)
		}
	}
}
