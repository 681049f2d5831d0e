package node_test

import (
	"testing"

	"github.com/nova-node/nova-node/node"
)

// TestAPIErrorNamesItsCodeOnce: a peer's refusal already ends with its
// code; the API error does not add it a second time.
func TestAPIErrorNamesItsCodeOnce(t *testing.T) {
	for _, c := range []struct {
		e    node.APIError
		want string
	}{
		{node.APIError{Code: "ESCALATION_REQUIRED", Message: "peer 12…x refused: justify it (ESCALATION_REQUIRED)"}, "peer 12…x refused: justify it (ESCALATION_REQUIRED)"},
		{node.APIError{Code: "AGENT_NOT_FOUND", Message: `agent not found: "x"`}, `agent not found: "x" (AGENT_NOT_FOUND)`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
