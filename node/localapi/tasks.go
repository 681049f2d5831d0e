package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"time"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// The task and swarm routes:
//
//	POST /v1/tasks                  ProposeRequest -> negotiation.Record
//	GET  /v1/tasks[?pending=1]      every proposal, or the pending ones
//	GET  /v1/tasks/{id}             one proposal
//	POST /v1/tasks/{id}/accept      AnswerRequest -> negotiation.Record
//	POST /v1/tasks/{id}/reject      AnswerRequest -> negotiation.Record
//	POST /v1/swarms                 CreateSwarmRequest -> SwarmCreated
//	GET  /v1/swarms                 the swarms the node coordinates
//	GET  /v1/swarms/{id}[?follow=1] one swarm; with follow, a JSON line per change until it ends

// ProposeRequest asks the node to propose a task from one of its agents.
type ProposeRequest struct {
	// From is the proposing local agent; default: the node's default agent.
	From string `json:"from,omitempty"`
	// To is the agent proposed to (name or name@peerID), or, with
	// ByCapability, a capability id.
	To           string   `json:"to"`
	ByCapability bool     `json:"byCapability,omitempty"`
	Task         string   `json:"task"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Complexity is simple, medium (default) or complex.
	Complexity negotiation.Complexity `json:"complexity,omitempty"`
	// TimeoutMs is how long the target has to answer, in milliseconds;
	// default the node's DefaultProposalTimeout. DeadlineMs (unix ms) wins
	// if set.
	TimeoutMs  int64 `json:"timeoutMs,omitempty"`
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	// Justification is required from L2/L3 to L0/L1 (ESCALATION_REQUIRED).
	Justification string `json:"justification,omitempty"`
}

// AnswerRequest accepts or rejects a received proposal.
type AnswerRequest struct {
	// EstimatedCompletionMs, for an accept; default the node's
	// DefaultEstimate.
	EstimatedCompletionMs int64 `json:"estimatedCompletionMs,omitempty"`
	// Reason (a code such as BUSY; default DECLINED) and an optional
	// Alternative agent, for a reject.
	Reason      string `json:"reason,omitempty"`
	Alternative string `json:"alternative,omitempty"`
}

// SubTaskRequest is one sub-task of a CreateSwarmRequest.
type SubTaskRequest struct {
	Description string `json:"description"`
	// Capabilities it needs, among the swarm's; empty: any participant.
	Capabilities []string `json:"capabilities,omitempty"`
}

// CreateSwarmRequest asks the node to start a swarm.
type CreateSwarmRequest struct {
	// As is the creating local agent; default: the node's default agent.
	As           string   `json:"as,omitempty"`
	Task         string   `json:"task"`
	Capabilities []string `json:"capabilities"`
	// SubTasks split the work; default: one sub-task per capability.
	SubTasks      []SubTaskRequest       `json:"subTasks,omitempty"`
	Justification string                 `json:"justification,omitempty"`
	Complexity    negotiation.Complexity `json:"complexity,omitempty"`
	// RecruitTimeoutMs is how long the agents proposed to have to answer,
	// in milliseconds: 0, or MinRecruitTimeout (1 s) to MaxRecruitTimeout
	// (7 days); 0: the node's TaskOptions.RecruitTimeout (default 30 s).
	RecruitTimeoutMs int64 `json:"recruitTimeoutMs,omitempty"`
}

// MaxRecruitTimeout bounds CreateSwarmRequest.RecruitTimeoutMs: a swarm
// that waits longer for its agents to answer is surely a mistake (and a
// count of milliseconds much larger would overflow a time.Duration).
const MaxRecruitTimeout = 7 * 24 * time.Hour

// MinRecruitTimeout is the least non-zero CreateSwarmRequest.RecruitTimeoutMs:
// a proposal's deadline must still be in the future when the negotiator
// sends it (negotiation refuses one that is not, INVALID_PROPOSAL), and
// the target needs time to answer. Less than this makes a swarm fail at
// random: at creation, or at its recruit deadline.
const MinRecruitTimeout = time.Second

// SwarmCreated is the answer to a CreateSwarmRequest: the swarm, and the
// error that made it fail at once (no proposal could be sent), if any.
type SwarmCreated struct {
	Swarm taskswarm.Swarm `json:"swarm"`
	Error *APIError       `json:"error,omitempty"`
}

// ProposeTask asks the node to send a task proposal.
func (c *Client) ProposeTask(ctx context.Context, req ProposeRequest) (negotiation.Record, error) {
	var v negotiation.Record
	return v, c.do(ctx, "POST", "/v1/tasks", req, &v)
}

// Tasks lists the node's proposals: all of them, or only the pending ones.
func (c *Client) Tasks(ctx context.Context, pendingOnly bool) ([]negotiation.Record, error) {
	var v []negotiation.Record
	u := "/v1/tasks"
	if pendingOnly {
		u += "?pending=1"
	}
	return v, c.do(ctx, "GET", u, nil, &v)
}

// Task returns one proposal.
func (c *Client) Task(ctx context.Context, id string) (negotiation.Record, error) {
	var v negotiation.Record
	return v, c.do(ctx, "GET", "/v1/tasks/"+url.PathEscape(id), nil, &v)
}

// AcceptTask accepts a received proposal.
func (c *Client) AcceptTask(ctx context.Context, id string, req AnswerRequest) (negotiation.Record, error) {
	var v negotiation.Record
	return v, c.do(ctx, "POST", "/v1/tasks/"+url.PathEscape(id)+"/accept", req, &v)
}

// RejectTask rejects a received proposal.
func (c *Client) RejectTask(ctx context.Context, id string, req AnswerRequest) (negotiation.Record, error) {
	var v negotiation.Record
	return v, c.do(ctx, "POST", "/v1/tasks/"+url.PathEscape(id)+"/reject", req, &v)
}

// CreateSwarm asks the node to start a swarm. A swarm that failed at once
// is returned together with its error.
func (c *Client) CreateSwarm(ctx context.Context, req CreateSwarmRequest) (taskswarm.Swarm, error) {
	var v SwarmCreated
	if err := c.do(ctx, "POST", "/v1/swarms", req, &v); err != nil {
		return taskswarm.Swarm{}, err
	}
	if v.Error != nil {
		return v.Swarm, v.Error
	}
	return v.Swarm, nil
}

// Swarms lists the swarms the node coordinates.
func (c *Client) Swarms(ctx context.Context) ([]taskswarm.Swarm, error) {
	var v []taskswarm.Swarm
	return v, c.do(ctx, "GET", "/v1/swarms", nil, &v)
}

// Swarm returns one swarm.
func (c *Client) Swarm(ctx context.Context, id string) (taskswarm.Swarm, error) {
	var v taskswarm.Swarm
	return v, c.do(ctx, "GET", "/v1/swarms/"+url.PathEscape(id), nil, &v)
}

// FollowSwarm calls fn with the swarm's state now and after each change,
// until it is completed or failed, ctx ends, or fn returns an error.
func (c *Client) FollowSwarm(ctx context.Context, id string, fn func(taskswarm.Swarm) error) error {
	resp, err := c.openStream(ctx, "/v1/swarms/"+url.PathEscape(id)+"?follow=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var s taskswarm.Swarm
		if err := dec.Decode(&s); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
}
