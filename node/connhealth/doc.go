// Package connhealth owns the health of a node's connections on the node's
// side: noticing a peer that is gone, and getting back to the peers it
// should be connected to.
//
// A [Monitor] owns:
//
//   - the TCP transport's socket timers: every TCP connection the node
//     dials or accepts carries [TCPUserTimeout] and keepalive probes after
//     [TCPKeepAliveIdle], then every [TCPKeepAliveInterval] (Linux), so
//     that a peer cut off the network is dropped in 10 to 15 s rather than
//     by yamux's keepalive 40 s later;
//   - dead paths: when the kernel gives up on one TCP connection, the
//     peer's other connections on the same path (same local and remote
//     IP) are closed too, so that its channels do not redial onto an idle
//     twin as dead;
//   - the router's ack check ([Monitor.AckCheck]): what the peer's kernel
//     has acknowledged on a TCP connection, which lets the router judge a
//     TCP probe by the kernel rather than by a pong queued behind data;
//   - the address book: where the nova peers the node identified can be
//     dialled, kept in the caller's [Store] and put back in the peerstore
//     at the next start, so that a restarted node reaches the peers its
//     outbox holds envelopes for;
//   - the configured peers ([WithPeers]): dialled at start and again every
//     10 s while they are not connected.
//
// Beside the Monitor, [ForgetPeers] keeps the peerstore to the peers the
// node is connected to, or was within [ForgetAfter]: libp2p keeps a peer's
// protocols, identify metadata and key for the life of the process, so a
// node that meets many peers over its life would hold them all. The node
// runs it on its own goroutine.
//
// Two parts of connection health live elsewhere, next to the state they
// need. QUIC liveness (protocol/liveness.go): the router probes an
// outbound QUIC stream that went silent with something unanswered, with a
// ping on its own connection, because only the router knows which
// streams wait for an answer; it also holds protocol.CloseSiblings, the
// rule of which connections share a path, which this package calls.
// Address moves (discovery/moved.go): when the machine's IP addresses
// change, discovery closes the connections from addresses it no longer
// has, redials their peers and restarts mDNS, because mDNS is
// discovery's.
//
// This package must not import node (node imports it) nor the other
// service packages besides protocol, whose AckState and CloseSiblings it
// uses; it reaches the node's bbolt file only through [Store].
//
// What its caller must do, in this order:
//
//  1. Build it with [New], giving the node's [Store] ([WithStore]) and
//     its configured peers ([WithPeers]).
//  2. Build the libp2p host with [Monitor.TCPTransport] as its TCP
//     transport; without it the socket timers, dead paths and ack checks
//     are off.
//  3. Call [Monitor.Attach] with the host before it listens or dials, and
//     give [Monitor.AckCheck] to the router (protocol.WithAckCheck).
//  4. Call [Monitor.Start] once the node's other parts are started: it
//     dials the configured peers.
//  5. Call [Monitor.Close] before closing the host; it is idempotent and
//     safe without Start, and waits for the address book's last write.
package connhealth
