package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// ProposeRequest asks the node to propose a task from one of its agents.
type ProposeRequest struct {
	// From is the proposing local agent; default: the node's first agent.
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
	// default DefaultProposalTimeout. DeadlineMs (unix ms) wins if set.
	TimeoutMs  int64 `json:"timeoutMs,omitempty"`
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	// Justification is required from L2/L3 to L0/L1 (ESCALATION_REQUIRED).
	Justification string `json:"justification,omitempty"`
}

// AnswerRequest accepts or rejects a received proposal.
type AnswerRequest struct {
	// EstimatedCompletionMs, for an accept; default DefaultEstimate.
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
	// As is the creating local agent; default: the node's first agent.
	As           string   `json:"as,omitempty"`
	Task         string   `json:"task"`
	Capabilities []string `json:"capabilities"`
	// SubTasks split the work; default: one sub-task per capability.
	SubTasks      []SubTaskRequest       `json:"subTasks,omitempty"`
	Justification string                 `json:"justification,omitempty"`
	Complexity    negotiation.Complexity `json:"complexity,omitempty"`
	// RecruitTimeoutMs is how long the agents proposed to have to answer,
	// in milliseconds: 0, or MinRecruitTimeout (1 s) to MaxRecruitTimeout
	// (7 days); 0: TaskOptions.RecruitTimeout (default 30 s).
	RecruitTimeoutMs int64 `json:"recruitTimeoutMs,omitempty"`
}

// MaxRecruitTimeout bounds CreateSwarmRequest.RecruitTimeoutMs: a swarm
// that waits longer for its agents to answer is surely a mistake (and a
// count of milliseconds much larger would overflow a time.Duration).
const MaxRecruitTimeout = 7 * 24 * time.Hour

// MinRecruitTimeout is the least non-zero CreateSwarmRequest.RecruitTimeoutMs:
// a proposal's deadline must still be in the future when the negotiator
// sends it (negotiation refuses one that is not, INVALID_PROPOSAL), and
// the target needs time to answer. Less than this made a swarm fail at
// random: at creation, or at its recruit deadline.
const MinRecruitTimeout = time.Second

// InvalidRequestError reports a request to the node's API with a field it
// cannot take; its code is INVALID_REQUEST (HTTP 400).
type InvalidRequestError struct {
	Field  string // as in the request's JSON
	Reason string
}

func (e *InvalidRequestError) Error() string {
	return "node: invalid " + e.Field + ": " + e.Reason
}

// Code is the error's code, INVALID_REQUEST.
func (e *InvalidRequestError) Code() string { return "INVALID_REQUEST" }

// recruitTimeout is req.RecruitTimeoutMs as a duration, once it is checked
// to be in [0, MaxRecruitTimeout].
func (req CreateSwarmRequest) recruitTimeout() (time.Duration, error) {
	const minMs, maxMs = int64(MinRecruitTimeout / time.Millisecond), int64(MaxRecruitTimeout / time.Millisecond)
	if ms := req.RecruitTimeoutMs; ms < 0 || ms > maxMs || (ms != 0 && ms < minMs) {
		return 0, &InvalidRequestError{Field: "recruitTimeoutMs",
			Reason: fmt.Sprintf("%d ms is out of range: give 0 (the node's default), or %d (%v) up to %d (%v)", ms, minMs, MinRecruitTimeout, maxMs, MaxRecruitTimeout)}
	}
	return time.Duration(req.RecruitTimeoutMs) * time.Millisecond, nil
}

// SwarmCreated is the answer to a CreateSwarmRequest: the swarm, and the
// error that made it fail at once (no proposal could be sent), if any.
type SwarmCreated struct {
	Swarm taskswarm.Swarm `json:"swarm"`
	Error *APIError       `json:"error,omitempty"`
}

func (n *Node) tasksRunning() (*negotiation.Negotiator, *taskswarm.Coordinator, error) {
	ts := n.taskState()
	neg, coord, _, err := ts.now()
	if err != nil {
		return nil, nil, errNoTasks
	}
	return neg, coord, nil
}

// Negotiator is the node's task negotiator; nil before Start and after
// Close.
func (n *Node) Negotiator() *negotiation.Negotiator {
	neg, _, _ := n.tasksRunning()
	return neg
}

// Coordinator is the node's swarm coordinator; nil before Start and after
// Close.
func (n *Node) Coordinator() *taskswarm.Coordinator {
	_, c, _ := n.tasksRunning()
	return c
}

// localAgent returns the address of local agent id, or of the node's first
// agent (by id) when id is empty.
func (n *Node) localAgent(id, flag string) (string, error) {
	if id == "" {
		local := n.reg.Local()
		if len(local) == 0 {
			return "", &agentcard.NotFoundError{Query: "(default)", Where: "this node, which hosts no agent: declare one in config.yaml"}
		}
		sort.Slice(local, func(i, j int) bool { return local[i].ID < local[j].ID })
		return local[0].Address(), nil
	}
	c, ok := n.reg.Get(id)
	if !ok || c.Origin != agentcard.OriginLocal {
		return "", &agentcard.NotFoundError{Query: id, Where: "agents hosted on this node (" + flag + " names a local agent)"}
	}
	return c.Address(), nil
}

// ProposeTask sends a task proposal from a local agent and returns its
// record (ProposalID, the thread, status pending).
func (n *Node) ProposeTask(ctx context.Context, req ProposeRequest) (negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
	if err != nil {
		return negotiation.Record{}, err
	}
	from, err := n.localAgent(req.From, "from")
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

// PendingTasks lists the proposals awaiting a decision: received ones that
// can still be accepted, and sent ones with no answer yet.
func (n *Node) PendingTasks() ([]negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
	if err != nil {
		return nil, err
	}
	return neg.ListPending(), nil
}

// TaskProposals lists every proposal this node sent or received (finished
// ones are kept for negotiation.DefaultRetention).
func (n *Node) TaskProposals() ([]negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
	if err != nil {
		return nil, err
	}
	return neg.List(), nil
}

// TaskProposal returns one proposal: the sent record if a local agent sent
// it, else the received one.
func (n *Node) TaskProposal(id string) (negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
	if err != nil {
		return negotiation.Record{}, err
	}
	r, ok := neg.Get(id)
	if !ok {
		return r, &negotiation.NotFoundError{ProposalID: id}
	}
	return r, nil
}

// AcceptTask accepts a proposal received by a local agent.
func (n *Node) AcceptTask(ctx context.Context, id string, req AnswerRequest) (negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
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

// RejectTask rejects a proposal received by a local agent.
func (n *Node) RejectTask(ctx context.Context, id string, req AnswerRequest) (negotiation.Record, error) {
	neg, _, err := n.tasksRunning()
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

// CreateSwarm starts a swarm coordinated by this node. When not one
// proposal could be sent, the swarm is returned failed with the error.
func (n *Node) CreateSwarm(ctx context.Context, req CreateSwarmRequest) (taskswarm.Swarm, error) {
	recruit, err := req.recruitTimeout()
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	_, coord, err := n.tasksRunning()
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	as, err := n.localAgent(req.As, "as")
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

// Swarm returns a swarm: this node's own if it coordinates it, else as its
// shared document shows it here.
func (n *Node) Swarm(ctx context.Context, id string) (taskswarm.Swarm, error) {
	_, coord, err := n.tasksRunning()
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	if s, ok := coord.Get(id); ok {
		return s, nil
	}
	if !strings.Contains(id, "swarm-") {
		return taskswarm.Swarm{}, &taskswarm.NotFoundError{SwarmID: id}
	}
	s, ok, err := n.swarmFromDoc(ctx, id)
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	if !ok {
		return taskswarm.Swarm{}, &taskswarm.NotFoundError{SwarmID: id}
	}
	return s, nil
}

// Swarms lists the swarms this node coordinates, oldest first.
func (n *Node) Swarms() ([]taskswarm.Swarm, error) {
	_, coord, err := n.tasksRunning()
	if err != nil {
		return nil, err
	}
	return coord.List(), nil
}

// taskHTTPStatus maps a task error to an HTTP status.
func taskHTTPStatus(err error) int {
	code := protocol.CodeOf(err)
	switch {
	case errors.Is(err, errNoTasks):
		return http.StatusServiceUnavailable
	case strings.HasPrefix(code, "INVALID"), code == "ESCALATION_REQUIRED", code == "TIER_VIOLATION", code == "SANDBOX_VIOLATION":
		return http.StatusBadRequest
	case strings.HasSuffix(code, "NOT_FOUND"):
		return http.StatusNotFound
	case code == negotiation.CodeWrongState, code == negotiation.CodeProposalTimeout, code == taskswarm.CodeSwarmState:
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

func writeTaskErr(w http.ResponseWriter, err error) { writeJSON(w, taskHTTPStatus(err), apiErr(err)) }

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, 400, &APIError{Code: "INVALID_REQUEST", Message: "request body: " + err.Error()})
		return false
	}
	return true
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// registerTaskRoutes adds the local API's task and swarm routes:
//
//	POST /v1/tasks                  ProposeRequest -> negotiation.Record
//	GET  /v1/tasks[?pending=1]      every proposal, or the pending ones
//	GET  /v1/tasks/{id}             one proposal
//	POST /v1/tasks/{id}/accept      AnswerRequest -> negotiation.Record
//	POST /v1/tasks/{id}/reject      AnswerRequest -> negotiation.Record
//	POST /v1/swarms                 CreateSwarmRequest -> SwarmCreated
//	GET  /v1/swarms                 the swarms this node coordinates
//	GET  /v1/swarms/{id}[?follow=1] one swarm; with follow, a JSON line per change until it ends
func (n *Node) registerTaskRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req ProposeRequest
		if !decodeBody(w, r, &req) {
			return
		}
		rec, err := n.ProposeTask(r.Context(), req)
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, 200, rec)
	})
	mux.HandleFunc("GET /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		list := n.TaskProposals
		if r.URL.Query().Get("pending") == "1" {
			list = n.PendingTasks
		}
		recs, err := list()
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, 200, nonNil(recs))
	})
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := n.TaskProposal(r.PathValue("id"))
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, 200, rec)
	})
	answer := func(accept bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req AnswerRequest
			if !decodeBody(w, r, &req) {
				return
			}
			do := n.RejectTask
			if accept {
				do = n.AcceptTask
			}
			rec, err := do(r.Context(), r.PathValue("id"), req)
			if err != nil {
				writeTaskErr(w, err)
				return
			}
			writeJSON(w, 200, rec)
		}
	}
	mux.HandleFunc("POST /v1/tasks/{id}/accept", answer(true))
	mux.HandleFunc("POST /v1/tasks/{id}/reject", answer(false))
	mux.HandleFunc("POST /v1/swarms", func(w http.ResponseWriter, r *http.Request) {
		var req CreateSwarmRequest
		if !decodeBody(w, r, &req) {
			return
		}
		s, err := n.CreateSwarm(r.Context(), req)
		if err != nil && s.ID == "" {
			writeTaskErr(w, err)
			return
		}
		out := SwarmCreated{Swarm: s}
		if err != nil {
			out.Error = apiErr(err)
		}
		writeJSON(w, 200, out)
	})
	mux.HandleFunc("GET /v1/swarms", func(w http.ResponseWriter, r *http.Request) {
		list, err := n.Swarms()
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, 200, nonNil(list))
	})
	mux.HandleFunc("GET /v1/swarms/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if r.URL.Query().Get("follow") != "1" {
			s, err := n.Swarm(r.Context(), id)
			if err != nil {
				writeTaskErr(w, err)
				return
			}
			writeJSON(w, 200, s)
			return
		}
		n.followSwarm(w, r, id)
	})
}

// followSwarm streams a swarm as JSON lines: the current state, then the
// state after each change, until it is completed or failed or the client
// goes away. Changes are noticed from the node's swarm events and, for a
// swarm coordinated elsewhere, by reading its document every half second.
func (n *Node) followSwarm(w http.ResponseWriter, r *http.Request, id string) {
	sub := n.obs.Subscribe(256)
	defer sub.Close()
	s, err := n.Swarm(r.Context(), id)
	if err != nil {
		writeTaskErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	last := ""
	write := func(s taskswarm.Swarm) bool {
		b, _ := json.Marshal(s)
		if string(b) == last {
			return true
		}
		last = string(b)
		if enc.Encode(s) != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !write(s) || s.Status.Terminal() {
		return
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			if e.EnvelopeID != id {
				continue
			}
		case <-tick.C:
		}
		s, err := n.Swarm(r.Context(), id)
		if err != nil {
			return
		}
		if !write(s) || s.Status.Terminal() {
			return
		}
	}
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
