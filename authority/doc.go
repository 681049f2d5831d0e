// Package authority decides what a remote agent may be: the tier and
// sandbox a node holds it at, whatever its card claims.
//
// A card is signed by its host, so it proves who hosts an agent, never what
// the agent may do. A swarm's authority is a set of admin keys, founded by
// one key (the [Authority] ID: the peer ID of the node that founded the
// swarm) and changed only by [Update]s that an admin signs, chained by hash
// like a log. An admin signs [Grant]s: for one node and one of its agents
// (or all of them), the highest tier it may claim, the sandboxes it may be
// in, optionally the capabilities it may advertise, with a validity window
// and a serial. A [Revocation], signed by an admin, cancels a grant by its
// serial. A node's operator may also trust a peer directly ([Trust]), for
// swarms without an authority.
//
// [Book] holds what a node knows (its authority's log, grants,
// revocations, trusts) and its Effective method is the one function every
// enforcement point relies on (through the registry's assessor): a remote
// card keeps its claimed tier and sandbox only where a valid, unexpired,
// unrevoked grant by a current admin (or a trust) covers them; anything else
// is least privilege: L3 and no sandbox.
//
// Records are libp2p signed envelopes (domain [Domain], one payload type per
// kind), at most [MaxRecordSize] bytes, decoded strictly with limits.
package authority
