// Package a2ahttp is the standard A2A gateway of a nova-node: any A2A client
// reaches any mesh agent over HTTP, and mesh agents call any A2A agent on
// the web. All A2A-version-specific code of nova-node lives here, so that a
// later SDK move touches one package.
//
// # What it owns
//
//   - [Gateway]: an http.Handler serving every mesh agent at /a2a/<agent>/
//     with JSON-RPC, in A2A v0.3 (through github.com/a2aproject/a2a-go
//     v0.3.3's server, with workarounds for its known bugs) and A2A v1.0 (a
//     binding of this package over the same executor and task store),
//     chosen per request by the A2A-Version header, and the A2A v1.0
//     HTTP+JSON (REST) binding at /a2a/<agent>/v1/ and /v1/ over the same
//     methods; the agents' cards, the node's aggregate card and the
//     authenticated extended cards; /healthz. Tasks live in bbolt (capped,
//     pruned, timed out), push notifications are signed webhooks with
//     retries and SSRF checks, and bearer tokens (static, or JWTs of one
//     issuer checked against its JWKS, with scopes per agent and method)
//     guard everything but cards and /healthz when configured.
//   - [Client]: the outbound A2A client (card discovery and cache, send,
//     stream or poll, structured results) for either wire version.
//   - [RemoteAgent]: an external A2A agent presented to the mesh as a card
//     and a handler.
//
// # What it must not import
//
// node, protocol (the libp2p router), discovery, crdt or mcpbridge: the
// mesh is reached only through the small [Mesh] interface, which node
// implements.
//
// # What the caller must do
//
//  1. Implement [Mesh] (Agents, Resolve, Call, Ready) over the registry and
//     router.
//  2. Build the gateway with [New] (Config.DB set to the node's bbolt
//     database; Config.RequireAuth set when the listener is not loopback,
//     with Config.TokenHashes from [HashToken]); call Start; mount it at
//     the root of its HTTP listener.
//  3. On shutdown, call http.Server.Shutdown and then [Gateway.Close].
//
// The payload convention between A2A messages and mesh payloads
// ([Request], [Answer]) is documented in docs/a2a.md.
package a2ahttp
