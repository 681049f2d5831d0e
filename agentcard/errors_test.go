package agentcard_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
)

type coder interface{ Code() string }

// TestErrorCodes produces every error code from the API that returns it and
// checks Code, errors.Is (also through wrapping), errors.As and the message
// prefix.
func TestErrorCodes(t *testing.T) {
	nodes := testNodes(t)
	r := agentcard.NewRegistry(nodes[0].id)
	mustRegister(t, r, sampleCard("mars", "plan"))
	mustMerge(t, r, remoteCard("mars", nodes[1].id, 1))

	_, invalidErr := r.Register(agentcard.Card{})
	_, notFoundErr := r.Resolve("pluto")
	_, addressErr := r.Resolve("pluto@")
	_, capErr := r.ResolveCapability("telepathy")
	_, ambiguousErr := r.Resolve("mars")

	tests := []struct {
		name     string
		err      error
		code     string
		sentinel error
		as       func(error) bool
	}{
		{"invalid card", invalidErr, agentcard.CodeInvalidCard, agentcard.ErrInvalidCard,
			func(err error) bool {
				var e *agentcard.InvalidCardError
				return errors.As(err, &e) && len(e.Problems) > 0
			}},
		{"agent not found", notFoundErr, agentcard.CodeAgentNotFound, agentcard.ErrAgentNotFound,
			func(err error) bool {
				var e *agentcard.NotFoundError
				return errors.As(err, &e) && e.Query == "pluto" && e.Where != ""
			}},
		{"bad address", addressErr, agentcard.CodeAgentNotFound, agentcard.ErrAgentNotFound,
			func(err error) bool {
				var e *agentcard.AddressError
				return errors.As(err, &e) && e.Address == "pluto@"
			}},
		{"capability not found", capErr, agentcard.CodeCapabilityNotFound, agentcard.ErrCapabilityNotFound,
			func(err error) bool {
				var e *agentcard.CapabilityNotFoundError
				return errors.As(err, &e) && e.Capability == "telepathy" && e.Where == "local registry (1 agent) and 1 remote card"
			}},
		{"ambiguous agent", ambiguousErr, agentcard.CodeAmbiguousAgent, agentcard.ErrAmbiguousAgent,
			func(err error) bool {
				var e *agentcard.AmbiguousError
				return errors.As(err, &e) && len(e.Candidates) == 2
			}},
	}
	sentinels := []error{agentcard.ErrInvalidCard, agentcard.ErrAgentNotFound, agentcard.ErrCapabilityNotFound, agentcard.ErrAmbiguousAgent,
		agentcard.ErrTooManyCards}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			var c coder
			if !errors.As(tt.err, &c) || c.Code() != tt.code {
				t.Fatalf("Code() of %v is not %s", tt.err, tt.code)
			}
			wrapped := fmt.Errorf("route to x: %w", tt.err)
			for _, s := range sentinels {
				if errors.Is(wrapped, s) != (s == tt.sentinel) {
					t.Fatalf("errors.Is(%v, %v) = %v", tt.err, s, !(s == tt.sentinel))
				}
			}
			if !tt.as(wrapped) {
				t.Fatalf("errors.As failed or fields missing for %#v", tt.err)
			}
			if !strings.HasPrefix(tt.err.Error(), "agentcard: ") {
				t.Fatalf("message %q lacks the package prefix", tt.err)
			}
		})
	}
}

func TestSentinelCodes(t *testing.T) {
	for code, err := range map[string]error{
		agentcard.CodeInvalidCard:        agentcard.ErrInvalidCard,
		agentcard.CodeAgentNotFound:      agentcard.ErrAgentNotFound,
		agentcard.CodeCapabilityNotFound: agentcard.ErrCapabilityNotFound,
		agentcard.CodeAmbiguousAgent:     agentcard.ErrAmbiguousAgent,
		agentcard.CodeTooManyCards:       agentcard.ErrTooManyCards,
	} {
		c, ok := err.(coder)
		if !ok || c.Code() != code {
			t.Errorf("sentinel %v has no Code %s", err, code)
		}
		if !strings.HasPrefix(err.Error(), "agentcard: ") {
			t.Errorf("sentinel message %q", err)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&agentcard.NotFoundError{Query: "pluto", Where: "local registry (3 agents) and 12 remote cards"},
			`agentcard: agent not found: "pluto" (searched local registry (3 agents) and 12 remote cards)`},
		{&agentcard.CapabilityNotFoundError{Capability: "x"}, `agentcard: capability not found: "x"`},
		{&agentcard.AmbiguousError{Name: "mars", Candidates: []string{"mars@A", "mars@B"}},
			`agentcard: ambiguous agent "mars": 2 candidates: mars@A, mars@B; use a full address`},
		{&agentcard.InvalidCardError{}, "agentcard: invalid card"},
		{&agentcard.TooManyCardsError{Host: "12D3KooW", ID: "mars", Limit: 256},
			`agentcard: too many cards from host "12D3KooW": card "mars" refused (at most 256 per host)`},
		{&agentcard.AddressError{Address: strings.Repeat("a", 100), Reason: "r"},
			`agentcard: invalid agent address "` + strings.Repeat("a", 64) + `"...: r`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
