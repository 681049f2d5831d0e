// Package agentcard owns nova-node's agent cards: the [Card] type and its
// validation, its JSON form, its signed form (a libp2p record envelope
// sealed by the hosting node's key), and the [Registry] of local and remote
// cards with its queries by address, capability and tier.
//
// # What it may import
//
// The standard library, nova-node's tiers and internal/wirecodec (the JSON
// depth scan shared with envelope) packages, and go-libp2p's core/crypto,
// core/peer and core/record. Never host, network or any p2p/
// package: the package does no I/O and starts no goroutines. The registry
// is a passive, mutex-guarded index whose remote entries expire against an
// injected clock ([WithClock]), so it needs no timer. Discovery and the
// router call it; it calls nothing.
//
// # Cards and addresses
//
// A card's JSON fields are the seed's (id, name, version, description,
// tier, protocols, endpoints, capabilities, revision, sandboxId, origin,
// lastSeenAt) plus host, the peer ID of the node hosting the agent.
// [Card.Validate] reports every problem at once, each named by its JSON path
// ("capabilities[2].id"). Capabilities are required but may be empty: a nil
// slice (JSON null, or the key absent) is a missing field, [] is a card with
// no capabilities.
//
// An agent's canonical address is "id@<peerID>" ([Card.Address],
// [SplitAddress]). Agent ids cannot contain '@', so the split is never
// ambiguous.
//
// Peer IDs (a card's host, the peer of an address or of a DHT key) longer
// than [MaxPeerIDLen] characters are refused before they are decoded:
// go-libp2p's base58 decoding takes quadratic time.
//
// JSON decoding is strict, for signed cards come from other nodes: keys
// match exactly, unknown and duplicate keys are errors, and failures are
// [*InvalidCardError]s naming the field. Every valid card survives
// json.Marshal then json.Unmarshal as an equal card ([Card.Equal]).
//
// # Signing
//
// A signed card is a libp2p record envelope ([record.Seal]) whose signature
// domain is [PayloadDomain] ("nova-agentcard"), payload type [PayloadType]
// ("/nova/agentcard/1") and payload the card as compact JSON. [Seal] signs
// with the hosting node's key and sets the card's host to that key's peer
// ID. [Open] accepts a signed card only if it is at most
// [MaxSignedCardSize] bytes (checked before parsing), the signature
// verifies, the payload type is ours, the card is valid, and the signer is
// the card's host. That last rule is what stops a node from publishing a
// card for an agent it does not host: no node can take over another node's
// agent address. [Validator] applies the same checks to DHT records under
// [Key] ("/nova/card/<peerID>/<id>"), also requiring the key's peer to be
// the signer, and selects the highest revision, then the latest LastSeenAt
// (the publisher's signed heartbeat).
//
// # The registry
//
// Local cards are those this node hosts: [Registry.Register] stamps them
// with this node as host, origin "local" and the current time, and bumps
// the revision when the data changes (not when an identical card is
// registered again). Remote cards come from other nodes through
// [Registry.MergeRemote], after the caller has verified them with [Open];
// a higher revision replaces, an equal one refreshes, a lower one is
// ignored. A host has at most [MaxRemoteCardsPerHost] (256) remote cards in
// the registry: past that, a card for a new agent of that host is refused
// with a [*TooManyCardsError], while new revisions and refreshes of the
// cards it holds are accepted, so one peer cannot fill the registry.
//
// TTL: a remote card is visible for the remote TTL ([WithRemoteTTL],
// default 10 minutes) after it was last merged. Once that has elapsed it is
// invisible to every query (Get, Resolve, Find*, List, Remote, Serialize)
// and is treated as absent by MergeRemote, so any revision is accepted
// again; [Registry.Expire] frees the memory of such cards and may be called
// whenever convenient. Local cards never expire. Refreshing is the
// publisher's job: discovery re-merges cards it sees again.
//
// [Registry.MergeRemoteAt] starts the TTL at a given time instead of now:
// discovery passes the heartbeat its host signed into the card (bounded by
// the local clock), so a card read from a DHT record that outlives its host
// still leaves the registry one TTL after the host's last heartbeat.
// Discovery calls [Registry.MergeRemoteAtShared], which keeps the card's
// slices rather than a copy of them: discovery's cache holds the same card
// and never writes it, so a node holds each member's card once.
//
// Resolution: [Registry.Get] is exact ("id" means the local card).
// [Registry.Resolve] takes "id@peer", which is exact, or a bare "id", which
// resolves only when exactly one visible card in the swarm (local or
// remote) has that id; several give an [*AmbiguousError] listing every
// candidate's full address, none a [*NotFoundError] saying what was
// searched.
//
// Every card the registry returns is a deep copy, but for the router's
// per-message lookups, which would spend more on the copies than on the
// lookup: [Registry.GetShared], [Registry.GetSharedAddr],
// [Registry.ResolveShared] and [Registry.FirstByCapabilityShared] return
// the stored card with its slices shared, never to be modified by the
// caller, and its address without building it.
// The registry never edits a stored card, it replaces it, so a shared card
// stays as it was whatever happens to the registry afterwards.
//
// # Errors
//
// Every error returned by this package carries an error code through a
// Code method (the seed's [CodeInvalidCard], [CodeAgentNotFound],
// [CodeCapabilityNotFound], [CodeAmbiguousAgent], and nova's own
// [CodeTooManyCards]) and matches the sentinel of its code with
// errors.Is; the typed errors carry the details for errors.As. The only
// exceptions are failures of the signing key itself in [Seal] and of
// encoding in [Registry.Serialize], which are internal errors.
package agentcard
