package taskswarm

import "time"

// EventType names what happened in a swarm.
type EventType string

// The events of a Coordinator and a Participant.
const (
	// EvtSwarmCreated: a swarm was created and is recruiting (To).
	EvtSwarmCreated EventType = "swarm-created"
	// EvtSwarmStatusChanged: a status transition, From -> To
	// (recruiting -> active -> completing -> completed, or -> failed).
	EvtSwarmStatusChanged EventType = "swarm-status-changed"
	// EvtRecruitAnswered: an agent proposed to answered, timed out or
	// could not be reached; Detail has the recruit status and reason.
	EvtRecruitAnswered EventType = "recruit-answered"
	// EvtAgentReleased: an acceptor was not needed and was told so.
	EvtAgentReleased EventType = "agent-released"
	// EvtSubTaskAssigned: a sub-task was sent to Agent (attempt Attempt).
	EvtSubTaskAssigned EventType = "subtask-assigned"
	// EvtSubTaskReassigned: a failed sub-task was given to another agent.
	EvtSubTaskReassigned EventType = "subtask-reassigned"
	// EvtSubTaskCompleted: a sub-task's result was recorded.
	EvtSubTaskCompleted EventType = "subtask-completed"
	// EvtSubTaskFailed: an attempt failed (Detail says why).
	EvtSubTaskFailed EventType = "subtask-failed"
	// EvtSubTaskEscalated: no capable agent remains; the L0 agent and the
	// escalation hook were told, and the swarm failed.
	EvtSubTaskEscalated EventType = "subtask-escalated"
	// EvtResultIgnored: a result from an agent not assigned, for a stale
	// attempt, or for a finished sub-task was ignored.
	EvtResultIgnored EventType = "result-ignored"
	// EvtSwarmReported: the outcome was sent to the creator.
	EvtSwarmReported EventType = "swarm-reported"
	// EvtSendFailed: an envelope could not be posted (Code, Detail).
	EvtSendFailed EventType = "send-failed"
	// EvtStoreFailed: a swarm could not be stored or loaded.
	EvtStoreFailed EventType = "store-failed"
	// EvtPublishFailed: the shared document could not be updated.
	EvtPublishFailed EventType = "publish-failed"
	// EvtTaskStarted: a Participant started Work on a sub-task.
	EvtTaskStarted EventType = "task-started"
	// EvtTaskAnswered: a Participant sent a sub-task's answer (Code set
	// for an error answer).
	EvtTaskAnswered EventType = "task-answered"
	// EvtTaskDuplicate: a Participant got a sub-task attempt it already
	// has; the cached answer was re-sent or the running one is awaited.
	EvtTaskDuplicate EventType = "task-duplicate"
)

// Event is one observable step. Events are handed to the Emit function of
// the configuration synchronously: it must not block.
type Event struct {
	Type      EventType `json:"type"`
	Time      time.Time `json:"time"`
	SwarmID   string    `json:"swarmId,omitempty"`
	SubTaskID string    `json:"subTaskId,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	From      Status    `json:"from,omitempty"`
	To        Status    `json:"to,omitempty"`
	Code      string    `json:"code,omitempty"`
	Detail    string    `json:"detail,omitempty"`
}
