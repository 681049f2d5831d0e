// Package mcpbridge shares MCP tools, resources and prompts across the nova
// mesh, speaking MCP through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) as client and as server:
//
//   - the [Registry] of the tools, resources and prompts that this node's
//     agents publish, with the names they carry inside the mesh and on the
//     wire to MCP clients, routing of tool calls to the source agent's
//     handler, invocation records and metrics;
//   - backends ([StartBackend]): the MCP servers an agent declares, stdio
//     processes or streamable HTTP endpoints, whose items it publishes in
//     the registry, followed through list_changed and restarted with
//     backoff;
//   - the [Bridge]: MCP between nodes on the libp2p protocol
//     [ProtocolID] (newline-delimited JSON-RPC on a stream, one long-lived
//     session per peer pair), and one aggregated MCP server over every
//     item of the swarm for local MCP clients, on a byte stream
//     ([Bridge.ServeConn], behind [RelayStdio] for `nova-node mcp`) or
//     streamable HTTP ([Bridge.HTTPHandler]);
//   - enforcement ([Policy]): the calling agent named in every request
//     must be hosted by the calling peer, and the tier and sandbox rules
//     apply to every call, read and prompt.
//
// Everything the SDK would panic on (bad names, bad schemas) is rejected
// first, with a typed error, so that a misbehaving backend can never crash
// the node. node builds the Bridge on its host and wires it; the CLI only
// relays stdio.
//
// # Names
//
// Inside the mesh a tool is named canonically "agent.tool" (requirement 5.6,
// see [Canonical] and [SplitCanonical]). Strict MCP clients only accept tool
// names matching ^[A-Za-z0-9_-]{1,64}$, so tools are exposed to MCP clients
// under a wire name ("agent_tool", see [WireName]) that a [WireNames] table
// maps back to the canonical name. Calls accept either form. A tool or
// prompt whose own name no other item of the swarm has is on the face under
// that bare name as well ([Entry.AliasOf]).
//
// # What the faces relay
//
// Beside lists, calls, reads and prompts: resource templates, completion,
// progress and log messages of tool calls, resource subscriptions and their
// updates (at most [MaxSubscriptions] per session), and a server's
// sampling and elicitation requests during a tool call, which go back to
// the client that made it. docs/mcp.md has the table, with the limits.
//
// # Errors
//
// Every error about a tool, resource, prompt or call has a Code method
// returning one of the Code* constants (DUPLICATE_TOOL and the others).
// Sentinels (ErrDuplicateTool, ...) match the typed errors with errors.Is;
// the typed errors carry the details (the tool name, the URI, the missing
// argument).
//
// # Failures are results, not retries
//
// A handler that fails does not make [Registry.CallTool] return an error: it
// becomes a [Result] with IsError set whose [ToolError] names the source
// agent and a code (requirement 5.4). The registry never retries a call
// (recovery strategy 5: the caller decides).
package mcpbridge
