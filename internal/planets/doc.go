// Package planets holds the 21 planetary agents of the seed for the demo
// (`nova-node demo`) and for tests: who they are, the tier each has in the
// seed's default tier table, the capabilities each declares, and
// deterministic built-in handlers: [Work] for swarm sub-tasks, [Answer] for
// plain requests and [Decide] for task proposals.
//
// The package is data and pure functions. It starts no goroutine, does no
// I/O and reads no clock: the same input gives the same output, so demo
// runs and tests are reproducible. The demo (internal/demo) builds cards
// with [Agent.Card], registers each agent on a node with [Answer] as its
// handler, and gives the node [Decide] and a [Work] function through
// node.TaskOptions: the node's negotiation.Negotiator answers proposals
// with Decide, and its taskswarm.Participant runs Work for the sub-task
// requests, which never reach Answer.
package planets
