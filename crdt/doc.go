// Package crdt shares replicated JSON documents between the nodes of a
// swarm: the network layer over the pure delta-state CRDTs of crdt/delta,
// made Byzantine fault tolerant (Kleppmann, "Making CRDTs Byzantine Fault
// Tolerant", 2022).
//
// A Manager owns every open document of a node. Each document has one
// GossipSub topic, nova/<swarm>/crdt/<name>, and one owner: its mutex,
// under which every write is signed, joined, persisted (Store) and only
// then published.
//
// Every write is an [Update]: the delta a mutator made, signed by its
// author's key (a replica is its node's peer ID, so only that key mints
// its dots), naming by hash the author's previous update and, for every
// other replica whose dots its delta's context holds, the update holding
// the highest of them. Gossip, catch-up answers and the store all carry
// the signed bytes. [DecodeUpdate] checks one update without any state:
// signature and signer, the dots it mints, a context no wider than what it
// names, limits (no seq above [MaxSeq], so nothing received can make a
// later write overflow). A document applies an update only once it holds
// every update it names (causal delivery), so an update cannot remove
// what does not exist or pre-empt another replica's future writes; until
// then it is held, within bounds per peer and per document.
//
// Receiving: the topic validator Rejects what does not decode
// (CRDT_DESERIALIZATION_FAILED), is forged (CRDT_FORGED_UPDATE), breaks a
// rule (CRDT_INVALID_UPDATE) or the write rule ([SourceCheck]); each is
// counted and, when forged or invalid, a [SecurityEvent]. It Ignores what
// the node holds already or cannot check yet (the source agent's card is
// unknown). Two valid updates of one replica minting the same dots
// (equivocation) are both kept and relayed (the delta join converges
// whatever the order) and raise CRDT_EQUIVOCATION.
//
// Catch-up runs on /nova/crdt/2.0.0: a request {doc, per replica: the
// highest dot held and a digest of the hashes of its updates}, answered by
// one frame per signed update the asker lacks, each checked as if it came
// by gossip. A replica whose digests differ below the asker's highest dot
// (an equivocating replica) is sent whole, so every honest node ends with
// every valid update. Catch-up runs when a document is opened (to every
// connected peer at once; Open returns when they answered), when a peer
// that speaks the protocol connects, when a gap shows, when a peer's digest
// (clock and log digest, on <doc topic>/clock) differs, when a peer's own
// catch-up question shows it holds updates this node lacks, and every
// CatchupInterval with a random topic peer. A node that wrote a document in
// the last 10 s also sends its digest when a peer joins the document's
// topics: an update published before GossipSub could reach that peer is
// found at once, not at the next periodic digest.
//
// A document stays open until Forget (which also deletes it from the
// Store) or Close. Lookup opens a document only if this node or a
// connected peer holds it, and leaves nothing behind otherwise.
//
// Storage: each document is its signed log (Store: a state record marking
// the format, then one signed update per entry, in the order applied),
// verified again when loaded. A document stored by a version without
// signed updates is written again as one signed update of a local agent
// ([WithLegacyRepair]) or refused with a [*LegacyError].
//
// Replica ids are peer IDs: a node whose data dir is lost also loses its
// identity.
//
// Dependencies: crdt/delta, libp2p (host, network, pubsub, record),
// internal/frame, internal/streamscope and internal/wirecodec. No other
// package of ours.
package crdt
