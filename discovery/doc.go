// Package discovery finds the agents of a nova swarm and feeds their
// verified cards into the node's registry. It owns a Kademlia DHT
// (go-libp2p-kad-dht) on the private protocol prefix "/nova", mDNS on the
// LAN, the bootstrap peers, a republish loop that is the node's heartbeat,
// and a refresh loop that keeps found cards alive while their hosts keep
// publishing, and the roster gossip that carries every member's signed
// records to every node. It also holds the swarm helpers the node needs around it:
// [PSK] (the private-network key from a swarm secret) and [ParseAddrs].
// Invite tokens are in the pure sub-package discovery/invite.
//
// # What it may import
//
// libp2p (core, kad-dht, go-libp2p-record, p2p/discovery/mdns),
// nova's agentcard, and discovery/invite (home of the swarm-name rule).
// Not GossipSub: the node owns the one GossipSub and hands discovery a
// publish function for the roster topic ([WithGossip]), and feeds the
// topic's messages to [Service.TakeGossip]. Never protocol, crdt,
// mcpbridge or node: the router reaches discovery
// through a small interface of its own, and the registry reaches nothing.
// Sandbox and tier filtering of query results is the caller's job (the
// router and the registry's users); discovery only finds and verifies.
//
// # Records
//
// All records use standard libp2p formats, so any libp2p implementation
// speaking "/nova/kad/1.0.0" can read them.
//
//   - "/nova/card/<peerID>/<agent>" (agentcard.Key): a card signed by its
//     host (agentcard.Seal, a libp2p record envelope). Put with PutValue,
//     which stores it on the closest peers and waits for their answers.
//   - "/nova/index/<peerID>" ([IndexKey]): the host's signed agent index
//     ([Index]: each hosted agent's id, card revision and capability ids,
//     and a heartbeat), so that a capability lookup knows which cards of a
//     provider to read, and so that a refresh costs one read per host.
//   - Provider records under the CIDs ([KeyCID], sha2-256 of the key) of
//     "nova/<swarm>/agent/<name>" ([NameKey]),
//     "nova/<swarm>/cap/<capability>" ([CapabilityKey]) and, for every
//     node hosting an agent, "nova/<swarm>/members" ([MembersKey], the
//     swarm's roster). Provider puts are not acknowledged, so lookups that
//     find nothing retry with backoff ([WithRetry]), and results are
//     cached for [WithLookupCacheTTL]. A key's first provide since Start
//     reaches the closest peers found within 2 s before the full
//     provide runs, so that a new agent is findable while a lookup slowed
//     by departed peers goes on.
//
// [Validator] is the DHT validator of the "nova" namespace; every node
// installs it, so a record is checked on every hop: on a put, on a read,
// and again by the reader. A card must open (signature, payload type,
// valid card), its signer must be its host and the key's peer, and its id
// the key's agent; an index must be signed by the key's peer. A forged or
// re-signed record is refused everywhere, and no node can take over
// another node's agent: it can only publish "name@<its own peer ID>".
// Select keeps the highest revision, then the latest heartbeat, then the
// greatest bytes, so a fresh heartbeat replaces an old one and the choice
// is stable. The DHT's "pk" validator stays; kad-dht's default "ipns" one
// is dropped.
//
// # What this node stores for others
//
// kad-dht keeps any valid record a peer puts, so the DHT's value and
// provider stores are nova's (quota.go): they count records and bytes per
// author (the peer a card or index key names, which the validator requires
// to be the signer; the peer a provider record names, which kad-dht
// requires to be the sender) and in total, and refuse a put past a bound
// with [ErrStoreFull] (counted in Stats.RecordsRefused and
// Stats.ProvidersRefused). Defaults: 256 records and 4 MiB per author,
// 16,384 records and 64 MiB in all; 1,024 provider records per peer and
// 65,536 in all ([WithRecordLimits], [WithProviderLimits]). Replacing a
// record counts only the difference, so an author at its bound still
// republishes. Expired records leave through the same stores, giving
// their room back.
//
// # Liveness: heartbeats bounded by the local clock
//
// A DHT record outlives its host: peers keep it until it ages out, and a
// reader cannot tell a live host's record from a dead one's by its
// presence. So every publish re-signs each local card with LastSeenAt set
// to the publish time (strictly increasing), and the index carries the
// same heartbeat. A reader trusts a card for one TTL ([WithTTL], equal to
// the registry's remote TTL) after the heartbeat its host signed, never
// after the local clock: a heartbeat more than [WithMaxClockSkew] in the
// future is refused, a smaller one counts as now. Discovery hands each
// card to the [Sink] with that heartbeat (agentcard.Registry.MergeRemoteAtShared),
// and the registry's TTL runs from it, so:
//
//   - a live host republishes every [WithRepublishInterval] (at most half
//     the TTL; 3 of the default 10 minutes), and the refresh loop re-reads
//     the index of every host whose cards this node has found, every
//     [WithRefreshInterval]; an index listing a card's current revision
//     vouches for it, a new revision is read and merged, so an update
//     reaches every registry that holds the card within one refresh. With
//     roster gossip (below) the refresh reads only the hosts no roster
//     message has vouched for within half the TTL: none while the gossip
//     flows;
//   - a host that leaves stops heartbeating, and its cards leave every
//     registry one TTL after its last heartbeat, however often its
//     lingering records are read. Its records age out of the DHT too:
//     value and provider records are kept one TTL ([WithTTL] sets the
//     DHT's MaxRecordAge and ProvideValidity);
//   - a host is re-read for two TTLs after its last heartbeat, so one that
//     comes back from a partition returns without a new lookup.
//
// Cards that arrive by other paths (the router's hello frames, with the
// registry's MergeRemote) refresh the same registry entries; the later
// time wins.
//
// # The roster: every agent, not only those of connected peers
//
// A hello reaches only the peers a node is connected to, and a lookup
// reads only what it is asked for. So that every node lists every agent
// of the swarm, two mechanisms work together.
//
// Roster gossip ([WithGossip]; a node always has it). On every publish a
// node sends one message on the swarm's roster topic ([RosterTopic],
// GossipSub's in a node): its signed index, then its signed cards in the
// index's order, as many as fit [MaxGossipSize]. Every member takes it
// ([Service.TakeGossip]) as it takes records from the DHT: the index must
// be signed by the message's author (whom GossipSub's own signature
// proves) and newer than the one held; each card carried must be the
// author's card of the agent at the same position, at the listed
// revision. A card held at that revision is not verified again, the index
// vouching for it. The index's heartbeat then extends every listed card,
// the new cards are merged, the cards the index no longer lists leave the
// sink at once (RetainPeer; [WithWithdrawals] is told which), and listed cards that the message did not
// carry are read from the DHT by the fetch loop. So a member's join, its
// card changes, its removed agents and its heartbeats reach every node in
// one GossipSub round, and each node handles one message per member per
// republish interval: O(swarm) per node, with no DHT read at all.
// Messages are taken at most gossipBurst (4) at once and then one per
// 10 s per author (or a quarter of the republish interval), past which
// they are ignored; authors tracked are bounded ([maxMembers]). A node
// paces its own messages within that rate: one held back is not lost, the
// node sends its latest state once the rate allows, so a burst of card
// changes ends with its last state on every node. A message due while no
// peer is on the topic ([WithGossipPeers]; Stats.GossipHeld) is held the
// same way rather than sent to no one: it would spend the rate for
// nothing, and the message that does reach the swarm would then wait for
// it to refill (a swarm started at once sent each node's a second time,
// all together, 20 s later). A message
// that lies (garbage, an index another key signed, a card that is not
// what the index lists) is a [*GossipError] (INVALID_CARD), counted, and
// reported to [WithSecurityEvents]; the node's validator rejects it, so
// GossipSub does not forward it. A newcomer cannot wait for every
// member's next heartbeat: its roster loop asks a connected peer (a
// bootstrap peer first) on [RosterProtocol] for the latest message of
// each author it holds (16 MiB at most), and takes each as if it came
// from the topic; and it sends its own message again, sealed under a new
// heartbeat, on the loop's second and third passes (about 3 and 7 seconds
// after Start; Stats.GossipResent), for the members whose GossipSub mesh
// had not formed at its first, unless that one went out to at least
// three peers of the topic ([WithGossipPeers]; Stats.GossipSpared): with
// flood publishing each of them had it at once and forwarded it on its
// mesh, and every resend costs every member one more message. The
// publish that follows the routing table's growth sends no roster message
// either then, nor does a publish retried because its DHT puts failed. A node that was alone, at its start or
// later, runs these passes again from its first connection (see
// Rejoining): a repeat of the same message would stop at the first node that
// held it, since a node ignores a message it holds and GossipSub forwards
// only what is accepted.
//
// The DHT roster. The roster loop ([Service.Roster],
// [WithRosterInterval]) reads the providers of the members key one second
// after Start, then after 2, 4, 8… seconds up to the roster interval (30 s
// by default) and every interval after that. With gossip the interval is
// the republish interval, since members arrive by gossip, and the read is
// skipped on the early passes once a peer has served its roster messages:
// every node provides the members key, so each read is a full DHT walk
// whose answers list up to every member. For every member whose cards
// this node has not found yet (a member whose messages were lost, or one
// that does not gossip) it reads the signed index and the listed cards
// (from the member itself when connected, else from the DHT), verified
// and fresh like a lookup's, and merges them into the sink. From then on
// the refresh loop keeps them alive like any card a lookup found.
//
// Why gossip rather than reads: with reads alone every node reads every
// other node's index every refresh interval, and the swarm's work grows
// with the square of its size: BenchmarkRosterCost measured 29 DHT
// requests per node per interval at 30 nodes and 47–59 at 60, against
// 0.01–0.02 with gossip at both sizes (roster_bench_test.go); in a
// 200-node swarm in one process those reads were half of the goroutines.
// Reading each card from its host on [RecordsProtocol] would save the
// DHT's hops but still cost one round trip, and a connection, per member
// per interval; a longer interval would make a removed agent linger.
//
// Known limit: a node whose clock jumps backwards signs heartbeats older
// than the records peers already hold for the same revision; peers keep
// the newer record until it ages out (one TTL), during which the node
// looks as old as that record. Restarts without persistent records are
// otherwise harmless.
//
// # Lookups
//
// [Service.FindByName] finds the providers of the name key, then reads
// each provider's card; [Service.FindByCapability] finds the providers of
// the capability key, then each provider's index and the listed cards
// that offer the capability (the card decides, not the index);
// [Service.Lookup] reads one card by address. On the wire:
//
//  1. Providers: a Kademlia GET_PROVIDERS query (kad-dht's messages, up to
//     10 peers at once, closest to the key first, moving to the closer
//     peers they name) that answers as soon as two of the 20 closest
//     peers it has heard of (five for a capability, which many agents
//     offer) have answered with providers besides this node, and all
//     name the same ones: every honest peer among the closest holds
//     every provider that reached it. This node's own provider store
//     counts as one answer when the node is among those peers. Answers
//     that differ mean a provide reached only some of the closest peers
//     (provides are not acknowledged), so the query then asks all of
//     them. Once a peer has answered with providers, the others have
//     100 ms, or three times that answer's wait, to complete the quorum;
//     the store's own answer starts no such wait. In a 100-node swarm
//     the query usually answers after its first round. Providers that
//     gave cards within [WithLookupCacheTTL] are reused without a query.
//  2. Records: each provider is asked the moment it is found (at most 16
//     at once), while the query goes on, over a connection the caller is
//     about to use anyway (a dial first where there is none). A name
//     costs one DHT GET_VALUE request to the provider itself for its card
//     (the host stores its own card and index, and its copy is the
//     newest). A capability costs one request on [RecordsProtocol]: the
//     provider answers with its signed index and the signed cards of its
//     agents that offer the capability, as it last published them; a
//     card this node already holds at the revision the index lists is
//     taken as held, the index vouching that it is current. A provider
//     that does not speak the protocol, or serves a record that fails a
//     check or a bound, is read with GET_VALUE requests instead (its
//     index, then each card); a host that does not answer GET_VALUE with
//     a valid record is read from the DHT with Quorum(1).
//  3. When that gives no card, kad-dht's full provider lookup (until the
//     closest peers have all answered) runs before the lookup answers, so
//     a peer answering fast with nothing valid cannot hide a name; then
//     [WithRetry]'s retries.
//
// A capability that six agents of other nodes offer, none of whose cards
// this node holds, therefore costs: no round trip for the providers this
// node's provider store holds (each one's records request leaves at
// once); one Kademlia round of GET_PROVIDERS to the ten peers closest to
// the key, of which the first four answers that agree with each other and
// with this node's store end the query (five when this node's
// store holds none of the providers; in a larger swarm, another round to
// the closer peers they name), each new provider's
// records request leaving as its answer arrives; and six records round
// trips, in parallel, one per provider, each carrying the provider's
// index and its cards that offer the capability. Per provider, the index
// is decoded and each card verified (one signature each) on the
// goroutine that read them, as soon as they arrive, in parallel with the
// other providers'.
// The lookup answers once the query has ended and every provider found
// has answered or failed: it waits for all of them, so that it returns
// every card the providers hold, not the fastest ones.
//
// Every card is checked as the nova validator checks it (signature,
// signer = host = the key's peer, agent id) whichever path it took, and
// every card returned is verified, fresh and already merged into the
// sink. So is every index read from the DHT. The index a host serves
// about itself on [RecordsProtocol] is checked likewise but for its
// signature: the secure connection it came on proves that the host sent
// it, which is all its signature proves to this node, and it is never
// passed on to another node (a roster message carrying the same bytes is
// ignored as already held, not relayed). Its authority records are handed
// to [WithAuthority]'s accept, which verifies each of them, as for any
// index. A stale but valid card is acceptable, its heartbeat bounds its
// age. Nothing found is an agentcard error with a seed code
// (AGENT_NOT_FOUND, CAPABILITY_NOT_FOUND) that says what was searched.
//
// # What the caller must do
//
// Build the host first (identify and ping on), then:
//
//	topic, err := ps.Join(discovery.RosterTopic(cfg.Swarm)) // ps: the node's GossipSub
//	svc, err := discovery.New(h, key, cfg.Swarm, reg, reg,
//		discovery.WithBootstrapPeers(peers), discovery.WithTTL(ttl),
//		discovery.WithGossip(func(ctx context.Context, m []byte) error { return topic.Publish(ctx, m) }))
//	// the topic's validator: svc.TakeGossip(msg.GetFrom(), msg.Data), nil →
//	// accept, ErrGossipIgnored → ignore, else reject; then subscribe and drain
//	err = svc.Start(ctx)   // after the host, before the router uses it
//	...
//	reg.Register(card); svc.Announce() // on every local card change
//	...
//	svc.Close()            // before closing the host
//
// The registry must be built with agentcard.WithRemoteTTL(ttl), the same
// TTL as [WithTTL]. Start publishes at once, then on the republish
// interval, after Announce, after a failed publish (backing off), and when
// the routing table has doubled since a publish that ended with fewer than
// k (20) peers in it: the swarm was then smaller than k, every put reached
// all of it, and the peers that joined since are closer to some keys. A
// node whose publish ended with k peers or more walked a larger swarm to
// the closest peers of each key already (a node joining a settled swarm
// fills its table with the walks' answers), so its records are not put a
// second time when its table fills; the republish interval moves them as
// the swarm changes. [Service.Publish]
// and [Service.Refresh] do the same work synchronously. mDNS
// ([WithMDNS], on by default) announces "_nova-<swarm>._udp" on the LAN
// and dials the peers it finds; tests keep it off.
//
// # Rejoining
//
// A node can end up with no connection at all: every peer trimmed it to
// stay within its watermarks before its routing table held anyone, the
// laptop slept, or the network was down when it started. Every second the
// publish loop looks; a node found alone dials the peers it joined
// through by hand ([Service.JoinedVia], the node's Connect) a second
// later, then after 2, 4, 8… seconds up to a minute, until a connection
// comes (Stats.Rejoins counts the attempts). The DHT dials its bootstrap
// peers and those when its routing table empties (every 2 minutes while
// it stays empty), and a node's relay client dials its relays. The
// publish loop leaves the bootstrap peers to them: dialling them as well
// every few seconds while a relay restarted kept nodes behind NAT from
// taking their reservations again. Without this a node that joined by
// hand, and whose routing table emptied while it was alone, would stay
// alone until a peer dialled it.
// Once connected again, the node runs a newcomer's roster passes again:
// it asks a peer for the roster messages it missed and sends its own
// again twice.
//
// # Goroutines
//
// New starts nothing. Start starts the publish loop (which first dials the
// bootstrap peers), the refresh loop, the roster loop, with gossip the
// fetch loop (which reads the cards roster messages listed without
// carrying them, at most [maxMembers] hosts queued) and, with mDNS, the
// loop that dials the peers mDNS finds; the DHT and mDNS run their own.
// [Service.TakeGossip] runs on its caller's goroutine (GossipSub's
// validation workers) and never waits on the network.
// Close cancels them, waits for every one, then closes the DHT; it is
// idempotent and safe before Start. Lookups, Publish, Refresh and Roster
// run on the caller's goroutine, fan out to goroutines that they wait for
// (at most 16 at work at once, and a lookup's provider query 10 more), and end
// when their context or the service does. The mDNS callback never blocks:
// it queues the peer or drops and counts it (Stats.MDNSDropped).
//
// # mDNS in this build
package discovery
