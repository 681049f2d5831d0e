// Package delta is the pure core of nova-node's replicated state: JSON
// documents as delta-state CRDTs (Almeida, Shoker, Baquero, "Delta State
// Replicated Data Types", 2018), their causal contexts (the seed's vector
// clocks), the anti-entropy that brings a replica up to date, and the
// CBOR encodings of deltas, documents and the seed's CRDTSyncMessage.
//
// The package is pure and deterministic. It imports only the standard
// library and github.com/fxamacker/cbor/v2: never libp2p, the network, the
// file system, the clock, randomness or another nova-node package; it
// starts no goroutine; time (a sync message's timestamp) is passed in. Its
// values are not safe for concurrent use: each document has one owner.
// Propagation over GossipSub, catch-up streams and persistence belong to
// the network package crdt, which is built on this API.
//
// # Data model
//
// A [Dot] (replica, seq) names one update: the seq-th of a replica. A
// [Context] is the set of dots a replica has seen, kept compact: a
// version vector (replica → n: every dot 1..n) plus a dot cloud of the
// dots seen out of order, as ranges, which folds back into the vector as
// gaps fill. [Context.Clock] is the version vector alone, the seed's
// vector clock; [VersionVector.Compare] orders two of them as syncthing
// does ([Equal], [Before], [After], [Concurrent]).
//
// A [Doc] is a JSON object flattened to paths: an observed-remove map from
// path to what the path holds, with one causal context for the whole
// document. A path holds entries of three kinds, each tagged by the dot of
// the update that wrote it:
//
//   - register values: a multi-value register ([MVRegister]); each value
//     also carries the Lamport time of its write (the document's greatest
//     Lamport time plus one);
//   - set elements: an observed-remove, add-wins set ([ORSet]) of JSON
//     values, each element with the dots of its additions;
//   - counter totals: a PN-counter in the causal form of the paper
//     ([PNCounter]), one running total per replica at one dot.
//
// An entry lives while no update that has seen its dot replaced it. A
// replica's state is its context plus its live entries: a removed or
// overwritten entry leaves only its dot in the context, where it costs
// nothing once the context is compact. There are no tombstones.
//
// # Paths
//
// A path is an RFC 6901 JSON Pointer: "" is the root (the whole document,
// always an object); otherwise "/" followed by segments separated by "/",
// each the unescaped name of an object member, with "~" written "~0" and
// "/" written "~1" ("/a~1b/c~0d" names member "c~d" of member "a/b"). No
// other escape exists, so every path has exactly one spelling, and a "~"
// followed by anything but 0 or 1 is an error. Segments may be empty
// ("/" names the member ""), must be UTF-8 and may not hold control
// characters. A path has at most [MaxPathDepth] segments and
// [MaxPathLen] bytes. Paths name object members only: arrays and sets are
// leaves, and "/a/0" never reaches into an array at "/a". [SplitPath],
// [JoinPath] and [ValidatePath] convert and check paths; invalid ones give
// a *[PathError].
//
// # Values
//
// Values are JSON texts of at most [MaxValueSize] bytes and
// [MaxValueDepth] levels, stored in canonical form: no insignificant white
// space, object members sorted by key (bytewise), strings escaped
// minimally (only '"', '\' and control characters), numbers kept as
// written. So 1, 1.0 and 1e0 are three different set elements; a
// duplicate object key is an error. [Doc.Set] spreads a non-empty object
// over paths, one register per member that is not itself a non-empty
// object; scalars, arrays and {} are stored whole. A {} register value
// marks an object that exists without members; an object otherwise exists
// while a path below it holds something.
//
// # Updates and what they replace
//
// Every mutator returns a [Delta] and changes nothing; [Doc.Join] is the
// only way state changes ([Doc.Apply] does both). An update replaces,
// among the entries its replica has seen:
//
//	Set(p, v)        everything at and below p; non-object entries (all but
//	                 {} values) at p's ancestors
//	Delete(p)        everything at and below p (Delete("") empties the doc)
//	SetAdd(p, e)     e's earlier additions at p; the register and counter
//	                 at p; everything below p; non-object entries above p
//	SetRemove(p, e)  e's additions at p
//	Incr(p, n)       the replica's own earlier total at p (the new dot
//	                 carries total+n); the register and set at p;
//	                 everything below p; non-object entries above p
//
// Each update mints one fresh dot per entry it writes, or one dot when it
// writes nothing, so every update advances its replica's clock. Its
// delta carries the new entries, and as its context exactly the new dots
// and the dots of the entries it replaces: nothing else, so it cannot
// remove what its replica never saw.
//
// # Conflicts
//
// Concurrent updates (neither saw the other) never lose each other: both
// survive in the state until an update that has seen them replaces them.
// Reads resolve deterministically:
//
//   - Concurrent Sets of one path keep every value. [Doc.Get] reads the
//     last writer's: greatest (Lamport time, replica ID). [Doc.Values]
//     returns that value first, then the others.
//   - SetAdd concurrent with SetRemove of the same element: the addition
//     wins (the removal only removes additions it has seen).
//   - Concurrent increments add up. A Delete concurrent with an increment
//     keeps that increment's dot, which carries the replica's running
//     total: the incrementing replica's whole contribution survives, other
//     replicas' observed totals are removed.
//   - Delete of a subtree concurrent with a write inside it: the delete
//     removes what it saw; the concurrent write survives and, with its
//     ancestors, is all that is left of the subtree. Delete("/a") with
//     Set("/a/x", 1) gives {"a":{"x":1}}.
//   - A value and a subtree at the same path (Set("/a", 1) with
//     Set("/a/b", 2)): the subtree wins the read, {"a":{"b":2}}; the
//     value stays available as a later element of Values("/a"), until an
//     update at or above "/a" that has seen it replaces it.
//   - Different kinds at one path read in the order object (members
//     below), set, counter, register: the kinds that merge concurrent work
//     win over a single value. Values lists them in that order.
//
// # Anti-entropy: what the network layer must do
//
// The caller owns propagation, persistence and time. The contract:
//
//  1. Give each document one owner (a loop or a mutex). Mutate, Join the
//     delta, persist the state, then publish: x, err := d.Apply(d.Set(p,
//     v)). Never call a second mutator before joining the first delta: a
//     mutator takes the next dot from the document's context, and two
//     updates with one dot lose one of them.
//  2. A replica ID (New) must be unique in the swarm, and must not be
//     reused by a replica that lost its state (its dots would repeat): use
//     the peer ID plus an incarnation number kept with the state.
//  3. Publish each delta x as a [SyncMessage] built by [NewSyncMessage]
//     with the document's clock after joining x ([Doc.Clock]), encoded by
//     [EncodeSyncMessage]. The clock is never empty (property 27).
//  4. Validate received bytes with [DecodeSyncMessage] and
//     [SyncMessage.Delta]. An error is a *[DeserializationError] with code
//     CRDT_DESERIALIZATION_FAILED: Reject the message, log it with
//     SourceAgentID, keep going (requirement 9.5). Reject a delta whose
//     [Delta.Dots] name a replica other than the publisher's (sender
//     attribution). Ignore one that [Doc.Seen] reports as already seen.
//  5. Join a delta that [Doc.Ready] reports ready. One that is not ready
//     depends on updates this replica missed: hold it, ask its sender for
//     a catch-up at once, then join the answer and the held delta, and
//     retry held deltas after every join. This keeps the clock exact: it
//     covers a dot only once every update up to it has been applied, so
//     equal clocks mean equal states and digests can be trusted. (Joining
//     a delta that is not ready is safe for convergence, as joins are
//     idempotent, commutative and associative, but until a catch-up lands
//     the clock may claim updates whose removals are missing.)
//  6. Catch-up (on connect, on join, on a gap, on a digest that shows a
//     peer ahead): send your [Doc.Context] (or only your [Doc.Clock],
//     cheaper and still correct); the peer answers [Doc.DeltaSince] of it,
//     encoded by [EncodeDelta]. Joining the answer has exactly the effect
//     of joining the peer's full state, whatever was lost before: one
//     round trip makes a late joiner current (property 28). A peer that
//     tracks acknowledgements may answer [Buffer.Since] instead, falling
//     back to DeltaSince when it reports pruned deltas. No peer can know
//     more of this replica's dots than it made: distrust an answer whose
//     context goes past Context().Max(own replica).
//  7. A small periodic digest of [Doc.Clock] lets idle peers notice that
//     they are behind: a peer whose clock compares Before or Concurrent
//     asks for a catch-up.
//  8. Persist with [EncodeDoc]; restore with New(replica) and
//     [Doc.JoinDoc] of [DecodeDoc]. Prune a [Buffer] to the lowest number
//     every known member has acknowledged.
//
// This contract trusts the peers: a delta's context says what it removes,
// so a joined context claiming dots that were never made deletes what they
// would have overwritten and pre-empts them. Between peers that may be
// hostile, join only deltas whose minted dots and context are vouched for.
// The network package crdt does so: each delta it joins is one update
// signed by its author, minting exactly [Delta.MintedRange], holding only
// entries it mints ([Delta.EntriesMinted]), with a context limited to
// updates it names by hash; and its catch-ups carry those signed updates,
// not DeltaSince.
//
// # Size
//
// A document's state is its live entries plus, per replica that ever
// wrote, one number and the ranges of dots seen out of order (none once
// deltas stop arriving out of order). 100,000 overwrites of the same 100
// keys leave 100 entries and one number per replica: about 2.7 KB encoded
// with a 52-byte peer ID. Deletes and set removals leave nothing behind.
// A delta is the size of what it writes plus the ranges of dots it
// replaces; a DeltaSince answer is what the peer lacks plus the ranges of
// the context, one range per run of dots between live entries the peer
// has. Replica IDs are never forgotten: the vector grows with the number
// of writers over the document's life.
//
// Encodings are capped at [MaxEncodedSize] before decoding; a document
// whose full state outgrows it can no longer be encoded whole, and
// transports with smaller frames must cap documents below their frame.
//
// # Wire layout
//
// Deltas and documents share one layout, a CBOR array encoded with RFC
// 8949 core deterministic encoding (equal states give equal bytes):
//
//	[version=1, format (1 document, 2 delta),
//	 replicas      [text...]            sorted, each named by its index below
//	 context       [replica, lo, hi]... ranges of seen dots, sorted, compact
//	 dots          [replica, lo, hi]... dots a delta mints; empty for a document
//	 lamport       uint                 greatest Lamport time
//	 entries       [[path, regs, elems, cnts]...]  sorted by path
//	   regs   [[replica, seq, lamport, json-text]...]
//	   elems  [[json-text, [replica, seq, ...]]...]
//	   cnts   [[replica, seq, total-int64]...]]
//
// A sync message is a CBOR map with the seed's keys: sourceAgentId (text),
// vectorClock (map of replica to count), payload (byte string: an encoded
// delta), timestamp (Unix milliseconds). Decoders check the size first,
// then decode with explicit limits (nesting, array and map sizes) and
// refuse indefinite lengths, duplicate map keys and tags; then they
// validate everything: replica IDs, compact contexts, every dot inside the
// context and in one place only, paths, canonical values, sort orders.
package delta
