package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// BroadcastTopic is the GossipSub topic of a swarm's broadcasts.
func BroadcastTopic(swarm string) string { return "nova/" + swarm + "/broadcast" }

// PubSubOptions are the GossipSub options a node should use: signed
// messages only (StrictSign), flood publishing of our own messages, topics limited to nova/<swarm>/, queues raised
// together so a burst of 1,000 broadcasts is not dropped (the defaults of 32
// drop most of it), messages capped at maxMessage bytes, and peer scoring
// that penalises invalid messages but not several nodes sharing an IP (a LAN
// behind one NAT, or a laptop running several nodes).
func PubSubOptions(swarm string, maxMessage int) []pubsub.Option {
	topic := BroadcastTopic(swarm)
	params := &pubsub.PeerScoreParams{
		Topics: map[string]*pubsub.TopicScoreParams{
			topic: {
				TopicWeight:                    1,
				TimeInMeshQuantum:              time.Second,
				InvalidMessageDeliveriesWeight: -100,
				InvalidMessageDeliveriesDecay:  0.5,
			},
		},
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		IPColocationFactorWeight:    0,
		IPColocationFactorWhitelist: []*net.IPNet{},
		BehaviourPenaltyWeight:      -1,
		BehaviourPenaltyThreshold:   6,
		BehaviourPenaltyDecay:       0.9,
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
	}
	thresholds := &pubsub.PeerScoreThresholds{
		GossipThreshold:   -100,
		PublishThreshold:  -500,
		GraylistThreshold: -1000,
	}
	return []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		// Our own broadcasts go to every topic peer in good standing, not only
		// to the mesh: the mesh is empty until the first heartbeat, and a
		// message sent to nobody is never re-sent.
		pubsub.WithFloodPublish(true),
		pubsub.WithSubscriptionFilter(pubsub.NewRegexpSubscriptionFilter(regexp.MustCompile(`^nova/` + regexp.QuoteMeta(swarm) + `/`))),
		pubsub.WithPeerOutboundQueueSize(4096),
		pubsub.WithValidateQueueSize(4096),
		pubsub.WithMaxMessageSize(maxMessage),
		pubsub.WithPeerScore(params, thresholds),
	}
}

// WithPubSub enables broadcast (recipient "*") on the swarm's topic.
func WithPubSub(ps *pubsub.PubSub, swarm string) Option {
	return func(o *options) error {
		if ps == nil || swarm == "" {
			return errors.New("protocol: WithPubSub needs a pubsub and a swarm name")
		}
		o.ps, o.swarm = ps, swarm
		return nil
	}
}

type broadcaster struct {
	name  string
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	// peers counts the topic's peers from its join and leave events, so
	// that a publish need not ask GossipSub's event loop (ListPeers, a
	// round trip through the loop that every message of a burst queues in).
	peers  atomic.Int64
	events *pubsub.TopicEventHandler
}

// lastPublisher is the last publisher whose broadcast was validated, with
// its ID in text: a burst comes from one publisher, and encoding its ID in
// base58 again for every message on every node is a cost of its own.
type lastPublisher struct{ last atomic.Pointer[peerText] }

type peerText struct {
	id   peer.ID
	text string
}

// text is p.String(), kept for the next message of the same publisher. A
// nil lastPublisher keeps nothing.
func (l *lastPublisher) text(p peer.ID) string {
	if l == nil {
		return p.String()
	}
	if last := l.last.Load(); last != nil && last.id == p {
		return last.text
	}
	t := &peerText{id: p, text: p.String()}
	l.last.Store(t)
	return t.text
}

// startBroadcast joins the topic with its validator. Caller holds r.mu.
func (r *Router) startBroadcastLocked() error {
	if r.o.ps == nil {
		return nil
	}
	name := BroadcastTopic(r.o.swarm)
	// Inline: the validator only decodes and looks up cards, so it runs in
	// GossipSub's validation workers rather than on a goroutine of its own
	// per message and hop (which an async validator gets, throttled, and
	// dropped past the throttle).
	pubs := &lastPublisher{}
	validate := func(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
		return r.checkBroadcast(msg, pubs)
	}
	if err := r.o.ps.RegisterTopicValidator(name, validate, pubsub.WithValidatorInline(true)); err != nil {
		return fmt.Errorf("protocol: broadcast validator: %w", err)
	}
	t, err := r.o.ps.Join(name)
	if err != nil {
		return fmt.Errorf("protocol: join %s: %w", name, err)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(4096))
	if err != nil {
		return fmt.Errorf("protocol: subscribe %s: %w", name, err)
	}
	events, err := t.EventHandler()
	if err != nil {
		return fmt.Errorf("protocol: topic events %s: %w", name, err)
	}
	r.bc = &broadcaster{name: name, topic: t, sub: sub, events: events}
	r.wg.Go(r.broadcastLoop)
	r.wg.Go(r.countTopicPeers)
	return nil
}

// countTopicPeers keeps bc.peers as GossipSub's peer events say.
func (r *Router) countTopicPeers() {
	for {
		ev, err := r.bc.events.NextPeerEvent(r.ctx)
		if err != nil {
			return
		}
		switch ev.Type {
		case pubsub.PeerJoin:
			r.bc.peers.Add(1)
		case pubsub.PeerLeave:
			r.bc.peers.Add(-1)
		}
	}
}

func (r *Router) stopBroadcast() {
	if r.bc == nil {
		return
	}
	r.bc.sub.Cancel()
	r.bc.events.Cancel()
	_ = r.o.ps.UnregisterTopicValidator(r.bc.name)
	_ = r.bc.topic.Close()
}

// validateBroadcast checks a message on the topic; the node runs it, as
// checkBroadcast, on every message of the topic, ours included.
// Reject: undecodable, not a broadcast, of a type that asks for an answer
// (request, task-proposal), or forged (the sender is not an agent
// of the peer that signed the message, or its metadata contradicts its
// card); each is a security event, and GossipSub penalises the forwarder.
// Ignore: duplicates. An envelope whose sender's card this node does not
// hold yet is accepted (GossipSub's signature proves the publisher, and
// the sender is one of its agents) and forwarded; broadcastLoop fetches the
// card before delivering it (see holdForCard).
func (r *Router) validateBroadcast(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	return r.checkBroadcast(msg, nil)
}

// checkBroadcast is validateBroadcast, with the text of the last publisher
// kept in pubs.
func (r *Router) checkBroadcast(msg *pubsub.Message, pubs *lastPublisher) pubsub.ValidationResult {
	publisher := msg.GetFrom()
	env, err := envelope.DecodeCBOR(msg.Data)
	if err == nil && env.Recipient != envelope.Broadcast {
		err = &envelope.InvalidError{Field: "recipient", Reason: "a broadcast must be addressed to \"*\""}
	}
	if err != nil {
		r.security(Event{Code: CodeOf(err), Detail: "malformed broadcast: " + err.Error(), Peer: publisher, SourceTier: -1, TargetTier: -1})
		return pubsub.ValidationReject
	}
	if err := envelope.CheckBroadcastType(env.Type); err != nil {
		// Every agent on every node would answer it, to the publisher:
		// one message would draw an answer per agent of the swarm.
		r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: envelope.Broadcast, MessageType: env.Type, Code: CodeOf(err),
			Detail: "broadcast refused: " + err.Error(), Peer: publisher, SourceTier: -1, TargetTier: -1})
		return pubsub.ValidationReject
	}
	if r.seen.has(seenKey{env.Sender, env.ID, true}) {
		return pubsub.ValidationIgnore
	}
	card, err := r.attributeAddr(publisher, pubs.text(publisher), env.Sender)
	var se *senderError
	switch {
	case errors.As(err, &se) && se.Reason == "the peer has presented no signed card for this agent":
		msg.ValidatorData = &broadcastIn{env: env}
		return pubsub.ValidationAccept
	case err != nil:
		r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: envelope.Broadcast, MessageType: env.Type, Code: CodeOf(err),
			Detail: "forged broadcast: " + err.Error(), Peer: publisher, SourceTier: -1, TargetTier: -1})
		return pubsub.ValidationReject
	}
	if md := env.Metadata; md != nil && !metadataAgrees(md, card) {
		err := &senderError{Sender: env.Sender, Peer: publisher, Reason: "broadcast metadata contradicts the signed card"}
		r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: envelope.Broadcast, MessageType: env.Type, Code: CodeOf(err),
			Detail: err.Error(), Peer: publisher, SourceTier: -1, TargetTier: -1})
		return pubsub.ValidationReject
	}
	msg.ValidatorData = &broadcastIn{env: env, from: card, known: true}
	return pubsub.ValidationAccept
}

type broadcastIn struct {
	env   *envelope.Envelope
	from  agentcard.Card
	known bool
}

func (r *Router) broadcastLoop() {
	for {
		msg, err := r.bc.sub.Next(r.ctx)
		if err != nil {
			return
		}
		in, ok := msg.ValidatorData.(*broadcastIn)
		if !ok {
			continue
		}
		// GossipSub keeps the message for its gossip window (a few
		// seconds) to answer IWANTs; what the validator decoded is of no
		// use to it, and would be kept as long: a burst of 1,000 held about
		// 1 KB a message on every node. Only this subscription reads it.
		msg.ValidatorData = nil
		if !r.seen.addNew(seenKey{in.env.Sender, in.env.ID, true}) {
			continue
		}
		if !in.known {
			r.holdForCard(in.env, msg.GetFrom())
			continue
		}
		r.deliverBroadcast(in.env, &in.from, msg.GetFrom())
	}
}

// Bounds of the broadcasts held for their sender's card: senders whose card
// is being fetched at once, and broadcasts held per sender. Past the first,
// a broadcast is delivered at once at least privilege; past the second, it
// is dropped (it was forwarded all the same).
const (
	maxCardFetches   = 16
	maxHeldPerSender = 256
	// A sender whose card could not be fetched is not looked up again for
	// cardMissTTL: its broadcasts meanwhile go at least privilege at once,
	// so a peer cannot make this node query the DHT per broadcast.
	cardMissTTL   = 30 * time.Second
	maxCardMisses = 1024
)

// heldBroadcasts are the broadcasts waiting, per sender address, for the
// card a fetch is looking up. Its mutex is a leaf: nothing else is locked
// while it is held.
type heldBroadcasts struct {
	mu     sync.Mutex
	wait   map[string][]*envelope.Envelope
	missed *bounded[string, time.Time] // senders whose card was not found, and when
}

// holdForCard delivers a broadcast whose sender's card this node did not
// hold when it was validated. GossipSub's signature (StrictSign) proves the
// publisher, and the validator checked that the sender is one of the
// publisher's agents (name@publisher); what the node lacks is the agent's
// tier and sandbox, which count only from signed facts. So the card is
// fetched on demand (the resolver's exact lookup, which checks its
// signature and host and lands it in the registry, where the swarm
// authority assesses it), and the sender's later broadcasts wait behind the
// first. If no card can be had, the broadcast is delivered from the sender
// as the signature proves it and nothing more: held at least privilege (L3,
// no sandbox, unvouched), as docs/security.md holds any agent that no grant
// or trust covers.
func (r *Router) holdForCard(env *envelope.Envelope, publisher peer.ID) {
	if card, err := r.attributeAddr(publisher, publisher.String(), env.Sender); err == nil {
		r.deliverHeld(env, card, true, publisher) // the card arrived since validation
		return
	}
	h := &r.held
	h.mu.Lock()
	if q, ok := h.wait[env.Sender]; ok {
		if len(q) < maxHeldPerSender {
			h.wait[env.Sender] = append(q, env)
		}
		h.mu.Unlock()
		return
	}
	if h.missed == nil {
		h.missed = newBounded[string, time.Time](maxCardMisses)
	}
	missed, ok := h.missed.get(env.Sender)
	if len(h.wait) >= maxCardFetches || r.o.resolver == nil || ok && clock.Now().Sub(missed) < cardMissTTL {
		h.mu.Unlock()
		r.deliverHeld(env, leastPrivilege(env.Sender, publisher), false, publisher)
		return
	}
	if h.wait == nil {
		h.wait = make(map[string][]*envelope.Envelope)
	}
	h.wait[env.Sender] = []*envelope.Envelope{env}
	h.mu.Unlock()
	addr := env.Sender
	if !r.spawn(func() { r.fetchSenderCard(addr, publisher) }) {
		h.mu.Lock()
		delete(h.wait, addr)
		h.mu.Unlock()
	}
}

// fetchSenderCard looks up the card of addr, hosted by publisher, and
// delivers the broadcasts held for it.
func (r *Router) fetchSenderCard(addr string, publisher peer.ID) {
	r.lookup(func(ctx context.Context, res Resolver) error {
		_, err := res.Lookup(ctx, addr)
		return err
	})
	card, err := r.attributeAddr(publisher, publisher.String(), addr)
	signed := err == nil
	if !signed {
		r.log.Debugw("broadcast from an agent whose card could not be fetched: delivered at least privilege", "sender", addr, "err", err)
		card = leastPrivilege(addr, publisher)
	}
	h := &r.held
	h.mu.Lock()
	if !signed {
		h.missed.put(addr, clock.Now())
	}
	held := h.wait[addr]
	delete(h.wait, addr)
	h.mu.Unlock()
	for _, env := range held {
		r.deliverHeld(env, card, signed, publisher)
	}
}

// deliverHeld delivers a held broadcast from card, unless card is signed
// and the broadcast's metadata contradicts it (checked here, since the
// validator could not).
func (r *Router) deliverHeld(env *envelope.Envelope, card agentcard.Card, signed bool, publisher peer.ID) {
	if md := env.Metadata; md != nil && signed && !metadataAgrees(md, card) {
		err := &senderError{Sender: env.Sender, Peer: publisher, Reason: "broadcast metadata contradicts the signed card"}
		r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: envelope.Broadcast, MessageType: env.Type, Code: CodeOf(err),
			Detail: err.Error(), Peer: publisher, SourceTier: -1, TargetTier: -1})
		return
	}
	r.deliverBroadcast(env, &card, publisher)
}

// leastPrivilege is the sender addr of a broadcast signed by publisher as
// far as the signature proves it: an agent of that peer, held at L3 with
// no sandbox and no vouched name.
func leastPrivilege(addr string, publisher peer.ID) agentcard.Card {
	id, _, _ := strings.Cut(addr, "@")
	c := agentcard.Card{ID: id, Host: publisher.String(), Origin: agentcard.OriginRemote, Tier: tiers.L3}
	return agentcard.WithStanding(c, tiers.L3, "", agentcard.Standing{Basis: agentcard.BasisNone,
		Note: "card not held: only the publisher's signature is known, so least privilege"})
}

// deliverBroadcast hands a broadcast to every local agent the sender may
// reach (tier rules with the broadcast flag: an L0 directive reaches every
// tier; sandbox rules as for direct messages), except the sender itself.
func (r *Router) deliverBroadcast(env *envelope.Envelope, from *agentcard.Card, via peer.ID) int {
	n := 0
	// Addresses are built once per message and per agent, not at every use:
	// a burst delivers every message to every agent of every node.
	fromAddr := from.Address()
	fromAgent := from.SandboxAgentAt(fromAddr)
	just := ""
	if env.Metadata != nil {
		just = env.Metadata.EscalationJustification
	}
	locals := r.localRecipients()
	for i := range locals.list {
		to := &locals.list[i] // shared and never changed: the call below takes the card by value
		if to.card.HasAddress(fromAddr) {
			continue
		}
		if r.o.rules.Check(tiers.Message{Source: from.Tier, Target: to.card.Tier, Type: string(env.Type), Justification: just, Broadcast: true}) != nil {
			continue
		}
		if d := r.o.policy.CheckReach(fromAgent, to.agent); !d.Allowed {
			continue
		}
		h := r.handler(to.card.ID)
		if h == nil {
			continue
		}
		// The slot is taken here, before the call is handed to a worker: a
		// stream of broadcasts to slow agents waits in GossipSub's bounded
		// queue (which drops the excess) instead of piling up goroutines.
		// The call runs on a warm worker (goWork), whose stack has grown
		// already, rather than on a new goroutine per delivery.
		select {
		case r.sem <- struct{}{}:
		case <-r.ctx.Done():
			return n
		}
		if !r.goWork(func() {
			defer func() { <-r.sem }()
			r.runHandler(h, env, *from, to.card, false, false, clock.Now()) // a broadcast is not recorded as a question; each agent gets its own payload
		}) {
			<-r.sem
			return n
		}
		n++
		ev := Event{Type: EvtMessageReceived, Time: clock.Now(), EnvelopeID: env.ID, Sender: fromAddr, Recipient: to.addr,
			MessageType: env.Type, Path: PathBroadcast, Success: true, Peer: via, SourceTier: int(from.Tier), TargetTier: int(to.card.Tier)}
		r.o.sink.Emit(ev)
	}
	return n
}

// localSet is the node's own agents as a broadcast is delivered to them,
// with their addresses and sandbox identities made once, under a lease on
// the registry: every message of a burst is delivered to every local
// agent, and copying the cards out of the registry for each (what
// Registry.Local does) was the largest allocation nova added to a burst.
// A set is never changed once published; a new one replaces it.
type localSet struct {
	lease agentcard.Lease
	list  []localRecipient
}

type localRecipient struct {
	card  agentcard.Card
	addr  string
	agent sandbox.Agent
}

// localRecipients returns the node's own agents, made again only when
// the registry has changed since (local cards never expire, so the lease
// holds until a card is stored or removed).
func (r *Router) localRecipients() *localSet {
	if s := r.locals.Load(); s != nil && r.reg.Holds(s.lease) {
		return s
	}
	lease := r.reg.Lease() // before the lookup: see agentcard.Lease
	cards := r.reg.Local()
	s := &localSet{lease: lease, list: make([]localRecipient, len(cards))}
	for i, c := range cards {
		addr := c.Address()
		s.list[i] = localRecipient{card: c, addr: addr, agent: c.SandboxAgentAt(addr)}
	}
	r.locals.Store(s)
	return s
}

// publish sends a broadcast from a local agent.
func (r *Router) publish(ctx context.Context, env *envelope.Envelope, from agentcard.Card) error {
	if err := envelope.CheckBroadcastType(env.Type); err != nil {
		return err
	}
	if r.bc == nil {
		return &deliveryError{Target: envelope.Broadcast, Reason: "broadcast is not enabled on this node"}
	}
	md := env.Metadata
	if md == nil {
		md = &envelope.Metadata{}
		env.Metadata = md
	}
	env.Sender = from.Address()
	md.Tier, md.SandboxID, md.RoutingHint = uint8(from.Tier), from.SandboxID, ""
	data, err := envelope.EncodeCBOR(env)
	if err != nil {
		return err
	}
	// Right after connecting, peers' subscriptions may not have arrived yet,
	// and a message published to nobody is never re-sent: when this node has
	// peers, wait briefly for one of them to be on the topic.
	if r.bc.peers.Load() <= 0 && len(r.bc.topic.ListPeers()) == 0 && len(r.h.Network().Peers()) > 0 {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.bc.topic.Publish(wctx, data, pubsub.WithReadiness(pubsub.MinTopicSize(1)))
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := r.bc.topic.Publish(ctx, data); err != nil {
		return &deliveryError{Target: envelope.Broadcast, Reason: "publish", Err: err}
	}
	return nil
}

// TopicPeers returns the peers subscribed to the swarm's broadcast topic.
func (r *Router) TopicPeers() []peer.ID {
	if r.bc == nil {
		return nil
	}
	return r.bc.topic.ListPeers()
}
