// Package gossiphealth keeps GossipSub's view of a connected peer's
// subscriptions whole when one of the pubsub streams between them dies
// while the peer stays connected (one of two simultaneous connections
// closing, a reset).
//
// go-libp2p-pubsub (v0.17.0) holds one outbound stream per peer, on which
// it sends its own subscriptions first (the hello), and learns the peer's
// subscriptions from what the peer sends on its own outbound stream. When
// its outbound stream to a peer dies while the peer is still connected,
// handleDeadPeers forgets the peer's subscriptions and opens a new
// outbound stream; but the peer's stream to it may live on (on the other
// connection), and the peer sends its subscriptions only on a new stream.
// The peer then stays off every topic (Topic.ListPeers) for as long as it
// stays connected: no broadcast, roster or document message is sent to it.
//
// A [Keeper] repairs it. When pubsub reports an outbound stream closed
// while the peer is still connected, the Keeper resets the peer's
// inbound pubsub streams opened before that moment, so that the peer
// opens a new one and sends its subscriptions again; and it holds pubsub's
// new outbound stream to the peer for [Settle], so that the peer has
// processed the loss of its stream (which makes it forget this node's
// subscriptions) before this node's hello reaches it. Both ends then hear
// each other's hello after they forgot each other. The peer needs no
// Keeper of its own for this; with one, the two holds overlap.
//
// This package must not import node (node imports it) nor the service
// packages.
//
// What its caller must do:
//
//  1. Build it with [New] on the node's host, before GossipSub.
//  2. Build GossipSub on [Keeper.Host] with [Keeper.Option] among its
//     options.
//  3. Call [Keeper.Close] after GossipSub is closed and before the host
//     is; it is idempotent and waits for the resets it started.
package gossiphealth
