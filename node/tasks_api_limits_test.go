package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// TestCreateSwarmRecruitTimeoutBounds: RecruitTimeoutMs outside 0 to 7
// days is refused with INVALID_REQUEST, by the Go API and over the local
// API (HTTP 400), before it is made a time.Duration: 9.3e12 ms would wrap
// to a negative duration (refused with a baffling message) and 18446744073710
// ms to a positive 0.45 ms (a swarm that gave its agents no time at all).
// The bounds themselves are taken.
func TestCreateSwarmRecruitTimeoutBounds(t *testing.T) {
	cfg := testnet.Config(t, 0, testnet.TCP)
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl := localapi.NewClient(n.Config().APISocketPath())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := func(ms int64) localapi.CreateSwarmRequest {
		return localapi.CreateSwarmRequest{Task: "t", Capabilities: []string{"no.such.capability"}, RecruitTimeoutMs: ms}
	}
	maxMs := localapi.MaxRecruitTimeout.Milliseconds()
	for _, ms := range []int64{-1, 1, localapi.MinRecruitTimeout.Milliseconds() - 1, maxMs + 1, 9_300_000_000_000, 18_446_744_073_710, 1<<63 - 1} {
		_, err := n.CreateSwarm(ctx, req(ms))
		var ie *node.InvalidRequestError
		if !errors.As(err, &ie) || protocol.CodeOf(err) != "INVALID_REQUEST" || ie.Field != "recruitTimeoutMs" {
			t.Errorf("CreateSwarm with RecruitTimeoutMs %d: %v; want INVALID_REQUEST naming recruitTimeoutMs", ms, err)
		}
		_, err = cl.CreateSwarm(ctx, req(ms))
		var ae *localapi.APIError
		if !errors.As(err, &ae) || ae.Code != "INVALID_REQUEST" {
			t.Errorf("POST /v1/swarms with recruitTimeoutMs %d: %v; want INVALID_REQUEST", ms, err)
		}
	}
	for _, ms := range []int64{0, localapi.MinRecruitTimeout.Milliseconds(), maxMs} {
		if _, err := n.CreateSwarm(ctx, req(ms)); protocol.CodeOf(err) == "INVALID_REQUEST" {
			t.Errorf("CreateSwarm with RecruitTimeoutMs %d refused: %v", ms, err)
		}
	}
}
