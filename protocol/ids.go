package protocol

import "github.com/libp2p/go-libp2p/core/protocol"

// IDA2A is this package's libp2p protocol: envelopes, acknowledgements and
// signed cards in varint-length-prefixed CBOR frames
// (docs/wire-protocol.md).
//
// Each of nova's other protocols is declared by the package that speaks it,
// since protocol, crdt, mcpbridge and discovery do not import each other:
// mcpbridge.ProtocolID ("/nova/mcp/1.0.0"), crdt.ID ("/nova/crdt/2.0.0"),
// discovery.ProtocolPrefix (the DHT's "/nova/kad/1.0.0") and
// discovery.RecordsProtocol ("/nova/records/1.0.0", a capability lookup's
// read of a provider's records).
// docs/wire-protocol.md lists them all.
const IDA2A protocol.ID = "/nova/a2a/1.0.0"

// ServiceName is the resource-manager service of the a2a protocol.
const ServiceName = "nova.a2a"
