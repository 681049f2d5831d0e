// Package negotiation is the seed's TaskNegotiator: one agent proposes a task
// to another with a "task-proposal" envelope, the target accepts
// ("task-accept", its id and an estimated completion time) or rejects
// ("task-reject", a reason code and an optional alternative agent), and a
// proposal left unanswered past its deadline becomes "timed-out"
// (PROPOSAL_TIMEOUT). Requirements 7.1–7.5, properties 23 and 24.
//
// # What it owns
//
// The payload types ([Proposal], [Accept], [Reject]) with their validation
// and hostile-input-safe decoders, the [Record] of every proposal this node
// sent or received, its persistence through the small [KV] interface, and a
// deadline timer. It does not route: it builds envelopes with an
// [envelope.Factory] and hands them to the Post function it is given, and it
// is handed the envelopes addressed to local agents through
// [Negotiator.Handle].
//
// It must not import the protocol router or node: node implements [KV] on
// its bbolt store, passes the router's Post, and routes incoming
// task-proposal, task-accept and task-reject envelopes to Handle.
//
// # Threads
//
// A proposal envelope starts a correlation thread: its ThreadID is its own
// ID, which is also the proposal's ID. The accept or reject answering it, and
// every later envelope of the same task (sub-task requests, results), carry
// CorrelationID = that thread (property 24).
//
// # Attribution
//
// Only the proposal's target may answer it. A capability-routed proposal
// (ProposeOptions.ByCapability) names no agent, so its first answer from any
// agent is taken and later ones are ignored. Agent addresses compare with
// [SameAgent]: "mars" and "mars@<peer>" name the same agent.
//
// # Lifecycle and goroutines
//
// [New] starts nothing. [Negotiator.Start] loads the stored records, times
// out at once every pending proposal whose deadline has passed, and starts
// one goroutine that fires later deadlines and prunes old finished records;
// [Negotiator.Close] stops it and waits. Callbacks (Emit, proposal handlers,
// outcome handlers) run on the goroutine that caused them (a Handle caller,
// an Accept caller, or the deadline goroutine), never under the
// Negotiator's lock; they must return quickly and must not block.
package negotiation
