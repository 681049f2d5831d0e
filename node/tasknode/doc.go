// Package tasknode runs the task layer (protocol/task/negotiation and
// protocol/task/taskswarm) on a node: it is the glue between those
// transport-free components and the node's router, registry, documents,
// discovery and host.
//
// A [Service] owns:
//
//   - one negotiation.Negotiator (the proposals the node's agents send and
//     receive), one taskswarm.Coordinator (the swarms they create) and one
//     taskswarm.Participant (the sub-tasks sent to them), started in that
//     order and closed in reverse;
//   - the dispatch of the task envelopes addressed to a local agent
//     ([Service.Wrap]) to those components, before the agent's own handler
//     sees the rest;
//   - the Coordinator's directory: the agents that have a capability, from
//     the registry, then the swarm's DHT, as the sandbox policy lets the
//     swarm's creator see them, without the agents of peers that left;
//   - peer departures: a peer disconnected for TaskOptions.PeerGoneAfter
//     that does not answer one dial has left, and its running sub-tasks are
//     reassigned;
//   - the swarms' shared state, mirrored into replicated documents named
//     by [SwarmDocName];
//   - the task layer's events (proposal-…, swarm-…, swarm-notice,
//     peer-gone), given to the node through Config.Emit;
//   - [TaskOptions] and [DefaultWork].
//
// Records are kept in the caller's Config.Store (buckets
// negotiation.Bucket and taskswarm.Bucket), so proposals and swarms
// survive a restart; a coordinator resumes its unfinished swarms.
//
// Package tasknode must not import package node: the node imports it, and
// reaches its parts only through Config's values and funcs.
//
// Its caller (the node) must:
//
//  1. build the router, the registry, the documents and discovery first,
//     and give them in [Config] with the host, the envelope factory, the
//     sandbox policy, an event sink, an event subscription and the store;
//  2. register every local agent's router handler wrapped by
//     [Service.Wrap], from before Start: envelopes that arrive before Start
//     wait for it (bounded by their context);
//  3. call [Service.Start] after the router and the documents started,
//     with a context that ends no earlier than Close;
//  4. call [Service.Close] before closing the router and the documents;
//     it is safe when Start did not run and may be called again.
package tasknode
