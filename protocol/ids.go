package protocol

import "github.com/libp2p/go-libp2p/core/protocol"

// Protocol IDs of nova-node. All of them live here.
const (
	// IDA2A carries envelopes: varint-length-prefixed CBOR frames.
	IDA2A protocol.ID = "/nova/a2a/1.0.0"
	// IDMCP carries MCP JSON-RPC, newline delimited (see mcpbridge).
	IDMCP protocol.ID = "/nova/mcp/1.0.0"
	// IDCRDT carries CRDT state catch-up (see crdt).
	IDCRDT protocol.ID = "/nova/crdt/1.0.0"
)

// ServiceName is the resource-manager service of the a2a protocol.
const ServiceName = "nova.a2a"
