package taskswarm

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// Status is where a swarm stands: recruiting -> active -> completing ->
// completed, or failed from any of the first three.
type Status string

// The swarm statuses of the seed.
const (
	StatusRecruiting Status = "recruiting" // proposals sent, collecting answers
	StatusActive     Status = "active"     // sub-tasks assigned and running
	StatusCompleting Status = "completing" // every sub-task done; reporting to the creator
	StatusCompleted  Status = "completed"  // done, results aggregated and reported
	StatusFailed     Status = "failed"     // nobody accepted, or a sub-task was escalated
)

// Terminal reports whether s is completed or failed.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// SubTaskStatus is where a sub-task stands.
type SubTaskStatus string

// The sub-task statuses of the seed.
const (
	SubTaskPending   SubTaskStatus = "pending"   // waiting for an agent (recruiting a replacement)
	SubTaskRunning   SubTaskStatus = "running"   // sent to AssignedAgent, no result yet
	SubTaskCompleted SubTaskStatus = "completed" // result recorded
	SubTaskFailed    SubTaskStatus = "failed"    // escalated: no capable agent remains
)

// RecruitStatus is where one agent the swarm proposed to stands.
type RecruitStatus string

// The recruit statuses.
const (
	RecruitProposing   RecruitStatus = "proposing"   // the proposal is being sent
	RecruitProposed    RecruitStatus = "proposed"    // sent, no answer yet
	RecruitAccepted    RecruitStatus = "accepted"    // accepted: a participant
	RecruitRejected    RecruitStatus = "rejected"    // the agent rejected
	RecruitTimedOut    RecruitStatus = "timed-out"   // no answer in time
	RecruitUnreachable RecruitStatus = "unreachable" // the proposal could not be sent (tier, sandbox, routing)
	RecruitReleased    RecruitStatus = "released"    // accepted but not needed: told so, not a participant
	RecruitDropped     RecruitStatus = "dropped"     // was a participant; lost its sub-tasks after failing them
)

func (s RecruitStatus) open() bool { return s == RecruitProposing || s == RecruitProposed }

// Recruit is one agent the swarm proposed to.
type Recruit struct {
	// Agent is the agent's address as the directory gave it.
	Agent string `json:"agent"`
	// Capabilities are those of the swarm's required capabilities that
	// the agent's card lists.
	Capabilities []string `json:"capabilities"`
	// ProposalID and Thread identify the proposal; every envelope between
	// the coordinator and this agent about the swarm is in Thread.
	ProposalID string `json:"proposalId,omitempty"`
	Thread     string `json:"thread,omitempty"`
	// Status is where the agent stands; Reason explains a refusal.
	Status RecruitStatus `json:"status"`
	Reason string        `json:"reason,omitempty"`
	// ForSubTask is set for an agent recruited to take over a failed
	// sub-task.
	ForSubTask string `json:"forSubTask,omitempty"`
	// Gone marks an agent whose node left; it gets no more work.
	Gone bool `json:"gone,omitempty"`
}

// SubTask is one piece of a swarm's work.
type SubTask struct {
	ID                   string   `json:"id"`
	Description          string   `json:"description"`
	RequiredCapabilities []string `json:"requiredCapabilities"`
	// AssignedAgent is the agent working on it (running), or the one that
	// completed it; empty while pending.
	AssignedAgent string        `json:"assignedAgent,omitempty"`
	Status        SubTaskStatus `json:"status"`
	// Attempts counts assignments; the current attempt is Attempts.
	Attempts int `json:"attempts"`
	// Result is the result of the completed attempt.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the last failure.
	Error string `json:"error,omitempty"`
	// Tried lists agents that failed it; it is not offered to them again.
	Tried []string `json:"tried,omitempty"`
	// DeadlineMs is when the running attempt times out (unix ms), with
	// Config.SubTaskTimeout; 0 otherwise.
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
}

// Swarm is the seed's SwarmSession, as the coordinator keeps it, stores it
// and publishes it to participants (Config.Shared).
type Swarm struct {
	ID              string `json:"id"`
	TaskDescription string `json:"taskDescription"`
	// Creator is the local agent that created the swarm; proposals,
	// requests and notifications are sent as this agent, and the final
	// report goes to it.
	Creator              string   `json:"creator"`
	RequiredCapabilities []string `json:"requiredCapabilities"`
	// Participants are the agents holding at least one sub-task.
	Participants []string `json:"participants"`
	// Recruits are every agent proposed to, in order.
	Recruits []Recruit `json:"recruits"`
	SubTasks []SubTask `json:"subTasks"`
	Status   Status    `json:"status"`
	// SharedState is the shared task state: "progress" ({"completed",
	// "total"}) maintained by the coordinator, plus keys set with
	// Coordinator.SetShared.
	SharedState map[string]json.RawMessage `json:"sharedState"`
	// Results maps sub-task id to result, filled as sub-tasks complete;
	// complete once Status is completed (the aggregate).
	Results map[string]json.RawMessage `json:"results"`
	// Error says why a failed swarm failed.
	Error string `json:"error,omitempty"`
	// Thread is the swarm's own correlation thread, used for the
	// notifications to the creator and the L0 agent. Envelopes with one
	// agent about its sub-tasks are in that agent's Recruit.Thread.
	Thread        string                 `json:"thread"`
	Justification string                 `json:"justification,omitempty"`
	Complexity    negotiation.Complexity `json:"complexity"`
	// RecruitDeadlineMs ends recruiting (unix ms).
	RecruitDeadlineMs int64 `json:"recruitDeadlineMs"`
	// RecruitTimeoutMs is CreateOptions.RecruitTimeout, for the proposals
	// to replacements; 0: Config.RecruitTimeout.
	RecruitTimeoutMs int64 `json:"recruitTimeoutMs,omitempty"`
	CreatedAt        int64 `json:"createdAt"` // unix ms
	UpdatedAt        int64 `json:"updatedAt"` // unix ms
}

// Clone returns a deep copy of s.
func (s Swarm) Clone() Swarm {
	s.RequiredCapabilities = slices.Clone(s.RequiredCapabilities)
	s.Participants = slices.Clone(s.Participants)
	s.Recruits = slices.Clone(s.Recruits)
	for i := range s.Recruits {
		s.Recruits[i].Capabilities = slices.Clone(s.Recruits[i].Capabilities)
	}
	s.SubTasks = slices.Clone(s.SubTasks)
	for i := range s.SubTasks {
		st := &s.SubTasks[i]
		st.RequiredCapabilities = slices.Clone(st.RequiredCapabilities)
		st.Result = bytes.Clone(st.Result)
		st.Tried = slices.Clone(st.Tried)
	}
	s.SharedState = cloneRaw(s.SharedState)
	s.Results = cloneRaw(s.Results)
	return s
}

func cloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = bytes.Clone(v)
	}
	return out
}

// SubTask returns the sub-task with this id.
func (s *Swarm) SubTask(id string) (SubTask, bool) {
	if st := s.subTask(id); st != nil {
		return *st, true
	}
	return SubTask{}, false
}

func (s *Swarm) subTask(id string) *SubTask {
	for i := range s.SubTasks {
		if s.SubTasks[i].ID == id {
			return &s.SubTasks[i]
		}
	}
	return nil
}

// member returns the latest accepted recruit of agent (a participant's
// record, carrying its thread and capabilities), or nil.
func (s *Swarm) member(agent string) *Recruit {
	for i := len(s.Recruits) - 1; i >= 0; i-- {
		r := &s.Recruits[i]
		if r.Status == RecruitAccepted && r.Agent == agent {
			return r
		}
	}
	return nil
}

// holds reports whether agent is the assigned agent of some sub-task.
func (s *Swarm) holds(agent string) bool {
	for _, st := range s.SubTasks {
		if st.AssignedAgent == agent {
			return true
		}
	}
	return false
}

// capable reports whether caps includes every capability in need.
func capable(caps, need []string) bool {
	for _, c := range need {
		if !slices.Contains(caps, c) {
			return false
		}
	}
	return true
}
