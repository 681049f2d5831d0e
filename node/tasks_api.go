package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/tasknode"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

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
// to be 0 or in [localapi.MinRecruitTimeout, localapi.MaxRecruitTimeout].
func recruitTimeout(req localapi.CreateSwarmRequest) (time.Duration, error) {
	const minMs, maxMs = int64(localapi.MinRecruitTimeout / time.Millisecond), int64(localapi.MaxRecruitTimeout / time.Millisecond)
	if ms := req.RecruitTimeoutMs; ms < 0 || ms > maxMs || (ms != 0 && ms < minMs) {
		return 0, &InvalidRequestError{Field: "recruitTimeoutMs",
			Reason: fmt.Sprintf("%d ms is out of range: give 0 (the node's default), or %d (%v) up to %d (%v)", ms, minMs, localapi.MinRecruitTimeout, maxMs, localapi.MaxRecruitTimeout)}
	}
	return time.Duration(req.RecruitTimeoutMs) * time.Millisecond, nil
}

// Negotiator is the node's task negotiator; nil before Start and after
// Close.
func (n *Node) Negotiator() *negotiation.Negotiator {
	neg, _, _ := n.tasks.Running()
	return neg
}

// Coordinator is the node's swarm coordinator; nil before Start and after
// Close.
func (n *Node) Coordinator() *taskswarm.Coordinator {
	_, c, _ := n.tasks.Running()
	return c
}

// localAgent returns the address of local agent id, or of the node's
// default agent (defaultAgent) when id is empty.
func (n *Node) localAgent(id, flag string) (string, error) {
	if id == "" {
		c, ok := n.defaultAgent()
		if !ok {
			return "", &agentcard.NotFoundError{Query: "(default)", Where: "this node, which hosts no agent: declare one in config.yaml"}
		}
		return c.Address(), nil
	}
	c, ok := n.reg.Get(id)
	if !ok || c.Origin != agentcard.OriginLocal {
		return "", &agentcard.NotFoundError{Query: id, Where: "agents hosted on this node (" + flag + " names a local agent)"}
	}
	return c.Address(), nil
}

// ProposeTask sends a task proposal from a local agent (req.From, or the
// default agent) and returns its record (ProposalID, the thread, status
// pending).
func (n *Node) ProposeTask(ctx context.Context, req localapi.ProposeRequest) (negotiation.Record, error) {
	if _, _, err := n.tasks.Running(); err != nil {
		return negotiation.Record{}, err
	}
	from, err := n.localAgent(req.From, "from")
	if err != nil {
		return negotiation.Record{}, err
	}
	return n.tasks.Propose(ctx, from, req)
}

// PendingTasks lists the proposals awaiting a decision: received ones that
// can still be accepted, and sent ones with no answer yet.
func (n *Node) PendingTasks() ([]negotiation.Record, error) { return n.tasks.Pending() }

// TaskProposals lists every proposal this node sent or received (finished
// ones are kept for negotiation.DefaultRetention).
func (n *Node) TaskProposals() ([]negotiation.Record, error) { return n.tasks.Proposals() }

// TaskProposal returns one proposal: the sent record if a local agent sent
// it, else the received one.
func (n *Node) TaskProposal(id string) (negotiation.Record, error) { return n.tasks.Proposal(id) }

// AcceptTask accepts a proposal received by a local agent.
func (n *Node) AcceptTask(ctx context.Context, id string, req localapi.AnswerRequest) (negotiation.Record, error) {
	return n.tasks.Accept(ctx, id, req)
}

// RejectTask rejects a proposal received by a local agent.
func (n *Node) RejectTask(ctx context.Context, id string, req localapi.AnswerRequest) (negotiation.Record, error) {
	return n.tasks.Reject(ctx, id, req)
}

// CreateSwarm starts a swarm coordinated by this node. When not one
// proposal could be sent, the swarm is returned failed with the error.
func (n *Node) CreateSwarm(ctx context.Context, req localapi.CreateSwarmRequest) (taskswarm.Swarm, error) {
	recruit, err := recruitTimeout(req)
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	if _, _, err := n.tasks.Running(); err != nil {
		return taskswarm.Swarm{}, err
	}
	as, err := n.localAgent(req.As, "as")
	if err != nil {
		return taskswarm.Swarm{}, err
	}
	return n.tasks.CreateSwarm(ctx, as, req, recruit)
}

// Swarm returns a swarm: this node's own if it coordinates it, else as its
// shared document shows it here.
func (n *Node) Swarm(ctx context.Context, id string) (taskswarm.Swarm, error) {
	return n.tasks.Swarm(ctx, id)
}

// Swarms lists the swarms this node coordinates, oldest first.
func (n *Node) Swarms() ([]taskswarm.Swarm, error) { return n.tasks.Swarms() }

// taskHTTPStatus maps a task error to an HTTP status.
func taskHTTPStatus(err error) int {
	code := protocol.CodeOf(err)
	switch {
	case errors.Is(err, tasknode.ErrNotRunning):
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
		writeJSON(w, 400, &localapi.APIError{Code: "INVALID_REQUEST", Message: "request body: " + err.Error()})
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

// registerTaskRoutes adds the local API's task and swarm routes (listed
// in package localapi).
func (n *Node) registerTaskRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.ProposeRequest
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
			var req localapi.AnswerRequest
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
		var req localapi.CreateSwarmRequest
		if !decodeBody(w, r, &req) {
			return
		}
		s, err := n.CreateSwarm(r.Context(), req)
		if err != nil && s.ID == "" {
			writeTaskErr(w, err)
			return
		}
		out := localapi.SwarmCreated{Swarm: s}
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
	stream := ndjsonStream[taskswarm.Swarm]{first: []taskswarm.Swarm{s}}
	if !s.Status.Terminal() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		last, _ := json.Marshal(s)
		ended := false
		stream.next = func() (taskswarm.Swarm, bool) {
			for !ended {
				select {
				case <-r.Context().Done():
					return taskswarm.Swarm{}, false
				case e, ok := <-sub.C:
					if !ok {
						return taskswarm.Swarm{}, false
					}
					if e.EnvelopeID != id {
						continue
					}
				case <-tick.C:
				}
				s, err := n.Swarm(r.Context(), id)
				if err != nil {
					return taskswarm.Swarm{}, false
				}
				b, _ := json.Marshal(s)
				if string(b) == string(last) {
					continue
				}
				last, ended = b, s.Status.Terminal()
				return s, true
			}
			return taskswarm.Swarm{}, false
		}
	}
	serveNDJSON(w, stream)
}
