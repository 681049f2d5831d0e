// Package localapi is the contract between the nova-node CLI and a running
// node: HTTP/1.1 with JSON bodies over the Unix socket nova.sock in the
// node's data dir (mode 0600 in a 0700 directory, so only the user who owns
// the node can reach it).
//
// It owns the [Client], the errors the socket reports ([APIError],
// [ErrNoNode]), every request and response body the socket carries
// ([SendRequest], [Status], [DocOp], [CreateSwarmRequest], ...), the
// [Event] a node reports (on the socket, in its audit log and to its
// subscribers, the router's events copied into it beside the node's own),
// the event types a node emits that a client matches ([EvtNodeStopped],
// ...), and the codes and bounds a client checks before it asks. The JSON
// of these types is the wire format: a field renamed here breaks every CLI
// that talks to a node of another build.
//
// The server side, which answers these requests, is package node: node
// imports localapi, never the reverse. localapi must not import node, nor
// anything that runs a node; it imports only the packages whose types
// travel on the socket (agentcard, envelope, protocol, crdt,
// protocol/task/negotiation, protocol/task/taskswarm, mcpbridge).
//
// # Streams
//
// Three requests answer with a stream of JSON lines
// (application/x-ndjson) instead of one body: the events
// ([Client.Events]), a document's changes ([Client.WatchDoc]) and a swarm's
// progress ([Client.FollowSwarm]). A stream that ends because the node
// stops says so in its last line ([EvtNodeStopped], events only); one cut
// off without it is an error that is also an [ErrNoNode] when the
// connection broke mid-stream (the node was killed).
package localapi
