// Package mcpbridge is the pure core of nova-node's MCP bridge: a registry of
// the tools, resources and prompts that agents publish to the mesh, with the
// names they carry inside the mesh and on the wire to MCP clients, routing
// of tool calls to the source agent's handler, invocation records and
// metrics.
//
// The package uses only the standard library. It does not speak MCP itself:
// a later layer adapts it to the official MCP Go SDK (servers, clients,
// transports) and to libp2p streams. Everything the SDK would panic on (bad
// names, bad schemas) is rejected here first, with a typed error, so that a
// misbehaving backend can never crash the node.
//
// # Names
//
// Inside the mesh a tool is named canonically "agent.tool" (requirement 5.6,
// see [Canonical] and [SplitCanonical]). Strict MCP clients only accept tool
// names matching ^[A-Za-z0-9_-]{1,64}$, so tools are exposed to MCP clients
// under a wire name ("agent_tool", see [WireName]) that a [WireNames] table
// maps back to the canonical name. Calls accept either form.
//
// # Errors
//
// Every error of this package has a Code method returning one of the Code*
// constants (DUPLICATE_TOOL and the others). Sentinels (ErrDuplicateTool,
// ...) match the typed errors with errors.Is; the typed errors carry the
// details (the tool name, the URI, the missing argument).
//
// # Failures are results, not retries
//
// A handler that fails does not make [Registry.CallTool] return an error: it
// becomes a [Result] with IsError set whose [ToolError] names the source
// agent and a code (requirement 5.4). The registry never retries a call
// (recovery strategy 5: the caller decides).
package mcpbridge
