// Package taskswarm is the seed's SwarmCoordinator and its participant side:
// decentralized swarms of agents working on one task (requirement 8,
// properties 25 and 26, recovery strategy "swarm participant failure").
//
// # What it owns
//
// [Coordinator] runs the swarms created by the local agents of one node
// (any node can coordinate; nothing is central). [Coordinator.Create]
// proposes the task, through a [negotiation.Negotiator], only to agents whose
// cards list a required capability (property 25); when the proposals are
// answered or Config.RecruitTimeout passes, it assigns the sub-tasks to the
// acceptors by declared capability and current load, each participant
// getting at least one (property 26; extra acceptors are released), and
// sends each sub-task to its agent as a "request" envelope. Results come
// back through [Coordinator.Handle]; each sub-task's result is recorded
// once. A failed attempt ([Coordinator.FailSubTask], an error answer, an
// undeliverable request, a timeout or [Coordinator.PeerGone]) is reassigned
// to another capable participant or a newly recruited capable agent; when
// none remains, the L0 agent is notified, the Escalate hook is called, and
// the swarm fails. When every sub-task is done the swarm goes completing ->
// completed with the aggregated results, reported to the creator. Every
// change is stored (KV) and published (Shared); [Coordinator.Start] resumes
// unfinished swarms after a restart.
//
// [Participant] runs on every node: it does the sub-tasks sent to local
// agents with a Work function on a bounded set of goroutines and answers in
// the same thread; a repeated attempt runs once.
//
// # Envelopes and threads
//
//	creator -> agent   task-proposal   {taskDescription, requiredCapabilities, ...}  starts the agent's thread T
//	agent -> creator   task-accept / task-reject                                     in T
//	creator -> agent   request         {swarmId, subTaskId, attempt, description, requiredCapabilities}  in T
//	agent -> creator   response        {swarmId, subTaskId, attempt, result}         in T
//	agent -> creator   error           {swarmId, subTaskId, attempt, error, code, message}  in T
//	creator -> agent   notification    {kind: "swarm-released", swarmId, reason}     in T
//	creator -> creator notification    {kind: "swarm-completed" | "swarm-failed", swarmId, results}  in the swarm's thread
//	creator -> L0      notification    {kind: "swarm-escalation", swarmId, subTaskId, reason}        in the swarm's thread
//
// Every envelope between the coordinator and one agent about a swarm is in
// the thread of the proposal that agent accepted (property 24), so the
// router treats the agent's answers as replies. The swarm's own thread
// (Swarm.Thread, its id) carries the reports.
//
// # What the caller must do
//
// node provides the interfaces ([Directory], [Shared], negotiation.KV) and
// the router's Post, starts the Negotiator before the Coordinator, routes
// "response" and "error" envelopes for local agents to Coordinator.Handle
// and "request" envelopes to Participant.Handle (each returns handled=false
// for envelopes that are not its own), calls PeerGone when a peer has left
// (not for a transient disconnection), and PeerBack when a peer connects or
// presents its agents' cards (again), so that running attempts are sent
// again after a restart of either side. The package must not import the
// router (protocol) or node.
//
// # Goroutines
//
// Constructors start nothing. Coordinator.Start starts one goroutine (timers,
// publishing, asynchronous work) and Participant.Start its workers; Close
// stops and waits for them. Emit, Escalate and Shared.Publish are called
// without locks held and must not block for long.
package taskswarm
