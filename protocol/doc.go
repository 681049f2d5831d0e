// Package protocol is nova-node's agent-to-agent protocol, /nova/a2a/1.0.0,
// on libp2p: the [Router] that delivers envelopes between the agents of one
// node and the agents of its peers, and enforces this node's tier and
// sandbox rules on everything it sends and receives.
//
// # What it owns
//
//   - Routing. An envelope is addressed directly (name or name@peer), by
//     capability (the first agent with it that the sender may reach: local,
//     then on connected nodes, then on nodes not tried, last on nodes that
//     could not be reached), or to "*" (broadcast on the swarm's GossipSub
//     topic, [BroadcastTopic]). A local recipient's handler is called in
//     memory; a remote one is reached over a channel.
//   - Channels. One ordered channel per pair of agents (local sender,
//     remote recipient), with sequence numbers, cumulative acks and nacks,
//     redials with backoff, and an outbox of unacknowledged envelopes
//     persisted through a [Store] (the state machine is package
//     protocol/channel). All the channels to one peer share one long-lived
//     outbound stream; frames are internal/frame's length-prefixed frames.
//     A receiver coalesces its acks: at once for an envelope whose sender
//     waits for it ([Router.Send]), within 2 ms for other traffic, and
//     within 200 ms for a channel that carried only a few questions and
//     answers since its last ack, whose answers already tell the
//     requesters (see chanin.go).
//   - Requests. [Router.Request] waits for the envelope that answers it (same
//     thread, from the target back to the sender); [Router.Thread] returns a
//     correlation thread as this node saw it.
//   - Hello and roster. Every outbound stream starts with a hello: this
//     node's agent cards, each signed by its key, and the roster of the
//     agents it hosts, so that a peer drops a withdrawn agent's card at
//     once. Hellos are re-sent periodically and on [Router.Announce].
//   - Enforcement on receive. A receiving node trusts nothing the sender's
//     node did: an envelope's sender must be an agent whose signed card the
//     peer at the other end presented, its metadata must match that card,
//     and the tier rules (package tiers) and the sandbox policy (package
//     sandbox) are checked again here. A refusal is nacked with its code; a
//     forgery is a security event.
//   - Liveness. A peer that owes an answer and stays silent is pinged, and
//     its connection closed if it does not answer (see liveness.go).
//
// # What it must not import
//
// protocol imports agentcard, envelope, tiers, sandbox, internal/clock,
// internal/frame and protocol/channel, and libp2p. It must not import node,
// discovery, crdt or mcpbridge, nor its subpackages other than
// protocol/channel (protocol/task/... and protocol/a2ahttp sit above the
// Router, and node wires them to it): discovery reaches the Router only
// through the [Resolver] interface, and events leave only through
// [EventSink].
//
// # What the caller (node) must do
//
//  1. Create the Router with [New] on a host whose peerstore holds its
//     private key and a registry whose Self is the host's ID, passing a
//     persistent [Store] ([WithStore]: the default keeps the outbox in
//     memory), the sandbox policy, the tier rules, and, for broadcast, a
//     GossipSub built with [PubSubOptions] ([WithPubSub]).
//  2. Register local agents' cards in the registry and their handlers with
//     [Router.Handle] before [Router.Start]; call [Router.Announce] after
//     registering or changing a local card later.
//  3. Provide an [EventSink] whose Emit neither blocks nor calls the Router:
//     the Router emits while holding its own locks.
//  4. Keep the [Store] and the [Resolver] from calling the Router, for the
//     same reason (the Store is read under Router.mu at Start).
//  5. Write handlers that return: they run on a bounded pool, under a
//     context that ends with the request timeout or Close.
//  6. Call [Router.Close] before closing the host: it resets the streams,
//     writes the outbox and watermarks, and waits for every goroutine the
//     Router started.
//
// # Lock order
//
// A → B means B may be taken while A is held. Every mutex of the package
// has a rank, and a goroutine may take a mutex only while every mutex it
// holds ranks lower (its row is above); so no two goroutines can wait for
// each other's mutexes. The arrows after each row are where the code does
// take a later mutex while holding that one.
//
//	1  outChannel.sendMu → outChannel.mu (flushSends), outStream.wmu (the frames' write), outStream.mu and Router.mu (a failed write: outStream.fail; starting the flusher: outStream.startFlusher)
//	2  outChannel.mu     → Router.mu (perform: spawn a dial), outStream.mu (bind, unbind), outChannel.evMu, Router.pmu (emitFailure), bounded.mu (wasAnswered)
//	3  Router.mu         → inChannel.mu (openIn, evictIdleLocked), bounded.mu (reached, regreetLater), MemStore.mu (Start)
//	4  inStream.mu       → inChannel.mu (ack, ackLater, close)
//	5  inChannel.mu      → Router.pmu (isAwaited, takeAnswer), bounded.mu (takeAnswer)
//	6  outStream.mu      leaf
//	7  outStream.wmu     leaf (held while the frames are written to the stream)
//	8  outChannel.evMu   leaf
//	9  Router.rosterMu   leaf in this package
//	10 Router.pmu        leaf
//	11 bounded.mu        leaf in this package (of one map at a time)
//	12 handlerCtx.mu     leaf
//	13 MemStore.mu       leaf
//
// Outside the package: the event sink's lock (node's Observer) is taken
// under outChannel.mu and inChannel.mu, the registry's under
// Router.rosterMu and bounded.mu (retainCards), libp2p's connection
// manager's under outChannel.mu, and at Start, under Router.mu, the
// Store's and GossipSub's (joining the broadcast topic); none of them calls
// back into the Router. No mutex is held across a handler call, a dial or
// a wait for a peer, except while frames are written to a stream:
// outChannel.sendMu and outStream.wmu on the sending side, inStream.mu on
// the receiving one (see outChannel's fields for why a sender's wait there
// never stops the stream's reader).
//
// Two ways of locking are outside the order, as neither can wait: TryLock
// (the outbound stream's reader takes outChannel.mu only if it is free, see
// outChannel.fromStream), and lockUnshared, for a mutex nobody else can
// reach yet (outChannelFor locks a new channel under Router.mu before
// publishing it). Whether the Router runs and its handler table are read
// without a lock (an atomic flag, a map replaced on write).
//
// The table is enforced by the package's tests. Each mutex is an
// orderedMutex whose type names its rank (lockorder.go); the tests run with
// the checker on (TestMain), which panics, and fails the run, when a
// goroutine takes a mutex that does not rank above every mutex it holds.
// TestLockOrderTableIsTheDocs holds this table to the ranks in the code.
// The lockorder build tag turns the checker on in other packages' tests
// (go test -tags lockorder ./testnet/). It sees the paths the tests run,
// not every path the code has; and a test that moves tens of thousands of
// envelopes turns it off (WithoutLockOrderChecks), since it walks the
// stack on every Lock. Without it, an orderedMutex is a sync.Mutex behind
// one call and the load of a flag that is false.
package protocol
