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

// TestStatusChannelOrderIsStable: two channels of one pair (the closed one
// and its successor) keep one order whatever order the node lists them in.
func TestStatusChannelOrderIsStable(t *testing.T) {
	mk := func() []protocol.ChannelInfo {
		return []protocol.ChannelInfo{
			{ID: "b", From: "alice@x", To: "bob@y", State: "open"},
			{ID: "c", From: "alice@x", To: "carol@z", State: "open"},
			{ID: "a", From: "alice@x", To: "bob@y", State: "closed"},
		}
	}
	first := mk()
	sortChannels(first)
	second := mk()
	second[0], second[2] = second[2], second[0]
	sortChannels(second)
	for i := range first {
		if first[i].ID != second[i].ID {
			t.Fatalf("order depends on the input: %v vs %v", first, second)
		}
	}
	if first[0].ID != "a" || first[1].ID != "b" || first[2].ID != "c" {
		t.Errorf("order %v, want closed bob, open bob, carol", first)
	}
}
