package protocol_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/nova-node/nova-node/protocol"
)

func TestEveryCodeRoundTripsThroughRemoteError(t *testing.T) {
	seedCodes := []string{"AGENT_NOT_FOUND", "CAPABILITY_NOT_FOUND", "TIER_VIOLATION", "SANDBOX_VIOLATION",
		"ESCALATION_REQUIRED", "CHANNEL_CLOSED", "DELIVERY_FAILED", "INVALID_CARD", "SCHEMA_VERSION_MISMATCH"}
	codes := protocol.Codes()
	for _, c := range seedCodes {
		if !slices.Contains(codes, c) {
			t.Errorf("seed code %s has no wire mapping", c)
		}
	}
	for _, c := range codes {
		s := protocol.SentinelFor(c)
		if s == nil {
			t.Fatalf("%s: no sentinel", c)
		}
		re := &protocol.RemoteError{ErrCode: c, Message: "m"}
		if !errors.Is(re, s) || protocol.CodeOf(re) != c {
			t.Errorf("%s: RemoteError does not match its sentinel", c)
		}
		if protocol.CodeOf(s) != c {
			t.Errorf("%s: CodeOf(sentinel) = %s", c, protocol.CodeOf(s))
		}
		for _, other := range codes {
			if other != c && errors.Is(re, protocol.SentinelFor(other)) {
				t.Errorf("%s matches %s too", c, other)
			}
		}
	}
	if protocol.CodeOf(errors.New("plain")) != protocol.CodeInternal || protocol.CodeOf(nil) != "" {
		t.Error("CodeOf fallbacks")
	}
	unknown := &protocol.RemoteError{ErrCode: "FROM_THE_FUTURE"}
	if errors.Is(unknown, protocol.ErrInternal) || protocol.CodeOf(unknown) != "FROM_THE_FUTURE" {
		t.Error("an unknown code must keep its code and match nothing")
	}
}
