package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// TestChannelsCloseTakesAPrefix: channels close takes a unique prefix of a
// channel's id, as tasks accept does; and status labels its counts by type
// as the sent messages' they are.
func TestChannelsCloseTakesAPrefix(t *testing.T) {
	_, _, dirA, _ := aliceAndBob(t)
	if _, errOut, code := runCLI(t, "send", "--data-dir", dirA, "--to", "bob", "--payload", "1"); code != 0 {
		t.Fatalf("send: %s", errOut)
	}
	// The sent count follows the acknowledgement.
	waitfor.Eventually(t, testnetWait, func() error {
		if out, _, _ := runCLI(t, "status", "--data-dir", dirA); !strings.Contains(out, "sent by type: request=1") {
			return fmt.Errorf("status does not say the counts by type are of sent messages:\n%s", out)
		}
		return nil
	})
	out, _, _ := runCLI(t, "channels", "--data-dir", dirA, "--json")
	var chs []protocol.ChannelInfo
	if json.Unmarshal([]byte(out), &chs) != nil || len(chs) != 1 {
		t.Fatalf("channels --json: %s", out)
	}
	if _, errOut, code := runCLI(t, "channels", "close", "", "--data-dir", dirA); code != 2 || !strings.Contains(errOut, "empty") {
		t.Errorf("channels close '': exit %d, %q; want a usage error", code, errOut)
	}
	out, errOut, code := runCLI(t, "channels", "close", chs[0].ID[:6], "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "closed alice@") {
		t.Fatalf("channels close PREFIX: exit %d\n%s%s", code, out, errOut)
	}
	// The closed channel's prefix names nothing open any more.
	if _, errOut, code := runCLI(t, "channels", "close", chs[0].ID[:6], "--data-dir", dirA); code != 1 || !strings.Contains(errOut, "CHANNEL_NOT_FOUND") {
		t.Errorf("closing it again: exit %d, %q", code, errOut)
	}
}

// TestMatchChannel: an ambiguous prefix is a usage error listing the ids.
func TestMatchChannel(t *testing.T) {
	chs := []protocol.ChannelInfo{{ID: "3f9c2a", State: "open"}, {ID: "3f11bb", State: "reconnecting"}, {ID: "3f0000", State: "closed"}, {ID: "aa", State: "open"}}
	for prefix, want := range map[string]string{"3f9": "3f9c2a", "3f1": "3f11bb", "3f0000": "3f0000", "3f00": "3f00", "zz": "zz", "a": "aa"} {
		if got, err := matchChannel(chs, prefix); err != nil || got != want {
			t.Errorf("%q: %q %v; want %q", prefix, got, err, want)
		}
	}
	_, err := matchChannel(chs, "3f")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "3f11bb, 3f9c2a") || strings.Contains(err.Error(), "3f0000") {
		t.Errorf("ambiguous: %v", err)
	}
}
