// Package webui serves the node's web view: one page, embedded in the
// binary, that shows the swarm live (this node and its peers, the agents
// of each with their tier, sandbox, grant and capabilities, the channels,
// the task swarms, the shared documents, the last events and a few
// metrics over the last minutes) and lets the node's owner send a
// message, propose a task and read or set a document value.
//
// The node mounts [Server] at /ui/ on its loopback HTTP listener, the one
// serving /metrics and /mcp, behind that listener's guard and local
// token. The page itself (HTML, CSS, JavaScript: [Public] reports those
// requests) carries no data and is the same in every binary, so a browser
// may load it without the token; every request for data or an action,
// under /ui/api/, must carry the token as "Authorization: Bearer". The
// page reads the token from its URL's fragment (#token=..., which a
// browser never sends to a server), keeps it in the tab's sessionStorage
// and sends it with each request: `nova-node open` prints that URL.
//
// The page's data comes from one server-sent events stream
// (GET /ui/api/stream): a snapshot of the node when the page connects and
// again whenever it changes (at most every [Options].Coalesce after an
// event, a peer's arrival or departure, and at least every
// [Options].Tick otherwise, each only when it differs from the last one
// sent), each event as the node records it, and a metrics sample per
// tick. Nothing polls.
//
// Package webui never imports node: the node passes in a [Source].
package webui
