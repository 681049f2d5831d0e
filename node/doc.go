// Package node is the composition root of nova-node: the one place where
// every package of the mesh meets. A [Node] is one device's member of a
// swarm, built from a [Config]; the CLI (cmd/nova-node), the demo and the
// test harness (testnet) build nodes, and nothing else imports this
// package.
//
// # What it owns
//
//   - Configuration: [Config], read from the data dir's config.yaml, NOVA_*
//     environment variables and flags, with [DefaultConfig] and
//     [Config.Validate]; [Node.Reload] applies a new configuration's agents.
//   - Identity and the data dir: the node's Ed25519 key ([IdentityFile],
//     [EnsureIdentity]), the directory's layout and permissions
//     ([EnsureDataDir]).
//   - The store: one bbolt file ([StoreFile]) holding cards, the router's
//     outbox and watermarks, the address book, the task layer's records,
//     the replicated documents and the A2A gateway's tasks. The services
//     reach it through small interfaces of their own (the router's Store,
//     crdt's Store, the task layer's KV); the gateway gets the database.
//   - The libp2p host's options: transports (TCP with a user timeout from
//     node/connhealth, QUIC,
//     WebSocket, WebTransport, WebRTC), security, the resource manager's
//     limits, the connection manager, the private-network key of the swarm.
//   - Wiring: the router (protocol), discovery, one GossipSub for
//     broadcasts and CRDT documents (crdt), the task layer
//     (protocol/task/negotiation, protocol/task/taskswarm, run on the node
//     by node/tasknode), connection health (node/connhealth), the MCP bridge
//     (mcpbridge) and the A2A gateway (protocol/a2ahttp). The services do not
//     import each other; node passes each the concrete types behind the
//     interfaces it declares (the router's Resolver is discovery, for
//     example).
//   - Observability: the [Observer] (recent events, subscriptions, the
//     audit log [AuditFile]), Prometheus metrics on their own listener, and
//     logging ([SetupLogging]).
//   - The local control API: HTTP over a Unix socket in the data dir, the
//     CLI's way into a running node.
//
// # What it must not do
//
// node holds no protocol rule. Validation, routing, tier and sandbox
// decisions, wire formats and CRDT merges live in the packages that own
// them; node decides only which of them run, with which options, and where
// their state is kept. It does not print: the CLI formats what node
// returns.
//
// # Lifecycle
//
// [New] builds every part: it validates the configuration, creates the
// data dir and the identity if needed, opens the store and the audit log,
// builds the connection-health monitor (node/connhealth), the libp2p host
// with no listener, GossipSub, discovery, the router, the documents and
// the MCP bridge, and registers the configured agents. Each part pushes its closer on one stack
// as it is built. go-libp2p and GossipSub run their own service goroutines
// from the moment they exist; nova's parts start nothing, and nothing
// listens or dials, until Start. [Node.Host], [Node.Router], [Node.Docs]
// and [Node.MCP] are never nil.
//
// [Node.Start] starts: it listens on the configured addresses, then starts
// discovery, the router, the documents, the task layer, the MCP bridge,
// the local API, the metrics listener, the A2A gateway and the
// connection-health monitor, pushing what each start adds on the stack.
// If a step fails, the whole stack is unwound and the node is closed: make
// a new one to try again. Start on a started node does nothing; after
// Close it fails.
//
// [Node.Close] unwinds the stack once, last pushed first: the node's own
// goroutines, the A2A gateway, the metrics listener, the local API, the
// MCP bridge, the task layer, the documents, the router, discovery,
// GossipSub, the connection-health monitor, the host, then the audit log
// and the store. Every goroutine a part started has ended when Close
// returns. Close is idempotent and safe before Start.
package node
