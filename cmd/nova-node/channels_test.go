package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/protocol"
)

// `channels` lists the channel a send opened, with the id that
// `channels close` takes; closing it reports it, and closing it again, or
// an id that names nothing, is CHANNEL_NOT_FOUND with a hint.
func TestChannelsListAndClose(t *testing.T) {
	_, _, dirA, _ := aliceAndBob(t)
	if _, errOut, code := runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", "1"); code != 0 {
		t.Fatalf("send: %s", errOut)
	}
	out, _, code := runCLI(t, "channels", "--data-dir", dirA, "--json")
	var chs []protocol.ChannelInfo
	if code != 0 || json.Unmarshal([]byte(out), &chs) != nil || len(chs) != 1 || chs[0].State != "open" {
		t.Fatalf("channels --json: exit %d\n%s", code, out)
	}
	id := chs[0].ID
	if out, _, code := runCLI(t, "channels", "--data-dir", dirA); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "open") || !strings.Contains(out, "alice@") {
		t.Fatalf("channels: exit %d, want the channel's id, state and agents:\n%s", code, out)
	}
	if out, _, code := runCLI(t, "status", "--data-dir", dirA); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("status does not show the channel's id %s:\n%s", id, out)
	}

	out, errOut, code := runCLI(t, "channels", "close", id, "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "closed alice@") {
		t.Fatalf("channels close: exit %d\n%s%s", code, out, errOut)
	}
	for _, bad := range []string{id, "no-such-channel"} {
		_, errOut, code := runCLI(t, "channels", "close", bad, "--data-dir", dirA)
		if code != 1 || !strings.Contains(errOut, "CHANNEL_NOT_FOUND") || !strings.Contains(errOut, "nova-node channels") {
			t.Errorf("channels close %s: exit %d, stderr %q; want CHANNEL_NOT_FOUND and a hint", bad, code, errOut)
		}
		out, _, _ := runCLI(t, "channels", "close", bad, "--data-dir", dirA, "--json")
		if e := jsonError(t, out); e.Code != "CHANNEL_NOT_FOUND" {
			t.Errorf("channels close %s --json: %q", bad, out)
		}
	}
	if _, _, code := runCLI(t, "channels", "close", "--data-dir", dirA); code != 2 {
		t.Errorf("channels close without an id: exit %d, want 2 (usage)", code)
	}
	// The next send opens a new channel.
	if _, errOut, code := runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", "2"); code != 0 {
		t.Fatalf("send after close: %s", errOut)
	}
	out, _, _ = runCLI(t, "channels", "--data-dir", dirA, "--json")
	chs = nil
	if json.Unmarshal([]byte(out), &chs) != nil {
		t.Fatal(out)
	}
	open := 0
	for _, c := range chs {
		if c.State == "open" {
			open++
			if c.ID == id {
				t.Errorf("the closed channel %s is open again", id)
			}
		}
	}
	if open != 1 {
		t.Errorf("%d open channels after the next send, want 1:\n%s", open, out)
	}
}

// A channel parked for a node that is away says how long its oldest
// envelope has waited; an open one does not.
func TestChannelLineShowsTheOldestWait(t *testing.T) {
	away := channelLine(protocol.ChannelInfo{ID: "c1", State: "away", From: "a", To: "b", Pending: 3, Stored: 3, OldestAgeMs: 65_400})
	if !strings.Contains(away, "away") || !strings.Contains(away, "oldest waiting 1m5s") {
		t.Fatalf("away channel: %q", away)
	}
	if open := channelLine(protocol.ChannelInfo{ID: "c2", State: "open", Pending: 1, OldestAgeMs: 3}); strings.Contains(open, "oldest") {
		t.Fatalf("open channel: %q", open)
	}
}
