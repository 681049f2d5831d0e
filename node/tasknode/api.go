package tasknode

import (
	"context"
	"strings"
	"time"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// The requests of the local API, on the running components. Agents are
// given as resolved addresses: which local agent a request speaks for
// (and the node's default agent) is the node's to say. Every method
// returns ErrNotRunning before Start and after Close.

// Propose sends a task proposal from local agent from and returns its
// record (ProposalID, the thread, status pending). The request's defaults:
// medium complexity, no required capability, a deadline
// DefaultProposalTimeout away.
func (ts *Service) Propose(ctx context.Context, from string, req localapi.ProposeRequest) (negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return negotiation.Record{}, err
	}
	if req.Complexity == "" {
		req.Complexity = negotiation.ComplexityMedium
	}
	deadline := req.DeadlineMs
	if deadline == 0 {
		d := time.Duration(req.TimeoutMs) * time.Millisecond
		if d <= 0 {
			d = DefaultProposalTimeout
		}
		deadline = time.Now().Add(d).UnixMilli()
	}
	caps := req.Capabilities
	if caps == nil {
		caps = []string{}
	}
	return neg.Propose(ctx, from, req.To, negotiation.Proposal{
		TaskDescription: req.Task, RequiredCapabilities: caps, EstimatedComplexity: req.Complexity, DeadlineMs: deadline,
	}, negotiation.ProposeOptions{Justification: req.Justification, ByCapability: req.ByCapability})
}

// Pending lists the proposals awaiting a decision: received ones that can
// still be accepted, and sent ones with no answer yet.
func (ts *Service) Pending() ([]negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return nil, err
	}
	return neg.ListPending(), nil
}

// Proposals lists every proposal this node sent or received (finished
// ones are kept for negotiation.DefaultRetention).
func (ts *Service) Proposals() ([]negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return nil, err
	}
	return neg.List(), nil
}

// Proposal returns one proposal: the sent record if a local agent sent it,
// else the received one.
func (ts *Service) Proposal(id string) (negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return negotiation.Record{}, err
	}
	r, ok := neg.Get(id)
	if !ok {
		return r, &negotiation.NotFoundError{ProposalID: id}
	}
	return r, nil
}

// Accept accepts a proposal received by a local agent, with an estimate
// of DefaultEstimate when the request gives none.
func (ts *Service) Accept(ctx context.Context, id string, req localapi.AnswerRequest) (negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return negotiation.Record{}, err
	}
	eta := req.EstimatedCompletionMs
	if eta <= 0 {
		eta = DefaultEstimate.Milliseconds()
	}
	if err := neg.Accept(ctx, id, eta); err != nil {
		return negotiation.Record{}, err
	}
	r, _ := neg.Lookup(id, negotiation.Received)
	return r, nil
}

// Reject rejects a proposal received by a local agent, as declined when
// the request gives no reason.
func (ts *Service) Reject(ctx context.Context, id string, req localapi.AnswerRequest) (negotiation.Record, error) {
	neg, _, err := ts.Running()
	if err != nil {
		return negotiation.Record{}, err
	}
	reason := req.Reason
	if reason == "" {
		reason = negotiation.ReasonDeclined
	}
	if err := neg.Reject(ctx, id, reason, req.Alternative); err != nil {
		return negotiation.Record{}, err
	}
	r, _ := neg.Lookup(id, negotiation.Received)
	return r, nil
}

// CreateSwarm starts a swarm created by local agent as and coordinated by
// this node; recruit is the request's recruit timeout, checked by the
// caller (0: TaskOptions.RecruitTimeout). When not one proposal could be
// sent, the swarm is returned failed with the error.
func (ts *Service) CreateSwarm(ctx context.Context, as string, req localapi.CreateSwarmRequest, recruit time.Duration) (taskswarm.Swarm, error) {
	_, coord, err := ts.Running()
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	opts := taskswarm.CreateOptions{Justification: req.Justification, Complexity: req.Complexity,
		RecruitTimeout: recruit}
	for _, st := range req.SubTasks {
		opts.SubTasks = append(opts.SubTasks, taskswarm.SubTaskSpec{Description: st.Description, RequiredCapabilities: st.Capabilities})
	}
	return coord.Create(ctx, as, req.Task, req.Capabilities, opts)
}

// Swarm returns swarm id: this node's own if it coordinates it, else as its
// shared document shows it on this node.
func (ts *Service) Swarm(ctx context.Context, id string) (taskswarm.Swarm, error) {
	_, coord, err := ts.Running()
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	if s, ok := coord.Get(id); ok {
		return s, nil
	}
	if !strings.Contains(id, "swarm-") {
		return taskswarm.Swarm{}, &taskswarm.NotFoundError{SwarmID: id}
	}
	s, ok, err := ts.swarmFromDoc(ctx, id)
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	if !ok {
		return taskswarm.Swarm{}, &taskswarm.NotFoundError{SwarmID: id}
	}
	return s, nil
}

// Swarms lists the swarms this node coordinates, oldest first.
func (ts *Service) Swarms() ([]taskswarm.Swarm, error) {
	_, coord, err := ts.Running()
	if err != nil {
		return nil, err
	}
	return coord.List(), nil
}
