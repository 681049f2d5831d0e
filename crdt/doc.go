// Package crdt shares replicated JSON documents between the nodes of a
// swarm: the network layer over the pure delta-state CRDTs of crdt/delta.
//
// A Manager owns every open document of a node. Each document has one
// GossipSub topic, nova/<swarm>/crdt/<name>, carrying the seed's
// CRDTSyncMessage (source agent, non-empty vector clock, encoded delta,
// timestamp), and one owner: its mutex, under which every mutation is
// joined, persisted (Store) and only then published.
//
// Receiving: a topic validator Rejects what cannot be decoded (logged with
// the source agent as CRDT_DESERIALIZATION_FAILED and counted; processing
// goes on) and updates that mint dots for a replica other than the peer that
// signed the message, and Ignores updates already seen. A delta is joined
// only when the document is Ready for it (no update it depends on is
// missing); otherwise it is held and the document asks the publisher for a
// catch-up.
//
// Catch-up runs on /nova/crdt/1.0.0: one request frame {doc, clock} and one
// answer frame {delta}, the delta being what the asker lacks (delta.Doc
// DeltaSince). It runs when a document is opened, when a peer that speaks
// the protocol connects, when a gap shows, and every CatchupInterval with a
// random topic peer (the periodic digest), so a late joiner or a node back
// from a partition is current after one round trip.
//
// Replica ids are peer IDs: a node's own dots are persisted before they are
// published, and a node whose data dir is lost also loses its identity.
//
// Dependencies: crdt/delta, libp2p (host, network, pubsub), internal/frame
// for framing. No other package of ours.
package crdt
