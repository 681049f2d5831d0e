package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
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
	if err := r.o.ps.RegisterTopicValidator(name, r.validateBroadcast, pubsub.WithValidatorInline(true)); err != nil {
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
	r.bc = &broadcaster{name: name, topic: t, sub: sub}
	r.wg.Go(r.broadcastLoop)
	return nil
}

func (r *Router) stopBroadcast() {
	if r.bc == nil {
		return
	}
	r.bc.sub.Cancel()
	_ = r.o.ps.UnregisterTopicValidator(r.bc.name)
	_ = r.bc.topic.Close()
}

// validateBroadcast runs for every message on the topic, ours included.
// Reject: undecodable, not a broadcast, of a type that asks for an answer
// (request, task-proposal), or forged (the sender is not an agent
// of the peer that signed the message, or its metadata contradicts its
// card); each is a security event, and GossipSub penalises the forwarder.
// Ignore: duplicates. An envelope whose sender's card this node does not know
// is accepted (it is properly signed by its host) and forwarded, but not
// delivered here: its tier cannot be checked.
func (r *Router) validateBroadcast(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
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
	card, err := r.attributeAddr(publisher, publisher.String(), env.Sender)
	var se *senderError
	switch {
	case errors.As(err, &se) && se.Reason == "the peer has presented no signed card for this agent":
		msg.ValidatorData = broadcastIn{env: env}
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
	msg.ValidatorData = broadcastIn{env: env, from: card, known: true}
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
		in, ok := msg.ValidatorData.(broadcastIn)
		if !ok {
			continue
		}
		if !r.seen.addNew(seenKey{in.env.Sender, in.env.ID, true}) {
			continue
		}
		if !in.known {
			r.log.Debugw("broadcast from an agent whose card is unknown here: forwarded, not delivered", "sender", in.env.Sender)
			continue
		}
		r.deliverBroadcast(in.env, in.from, msg.GetFrom())
	}
}

// deliverBroadcast hands a broadcast to every local agent the sender may
// reach (tier rules with the broadcast flag: an L0 directive reaches every
// tier; sandbox rules as for direct messages), except the sender itself.
func (r *Router) deliverBroadcast(env *envelope.Envelope, from agentcard.Card, via peer.ID) int {
	n := 0
	for _, to := range r.reg.Local() {
		if to.Address() == from.Address() {
			continue
		}
		just := ""
		if env.Metadata != nil {
			just = env.Metadata.EscalationJustification
		}
		if r.o.rules.Check(tiers.Message{Source: from.Tier, Target: to.Tier, Type: string(env.Type), Justification: just, Broadcast: true}) != nil {
			continue
		}
		if d := r.o.policy.CheckReach(from.SandboxAgent(), to.SandboxAgent()); !d.Allowed {
			continue
		}
		h := r.handler(to.ID)
		if h == nil {
			continue
		}
		// The slot is taken here, before a goroutine exists: a stream of
		// broadcasts to slow agents waits in GossipSub's bounded queue
		// (which drops the excess) instead of piling up goroutines.
		select {
		case r.sem <- struct{}{}:
		case <-r.ctx.Done():
			return n
		}
		if !r.spawn(func() {
			defer func() { <-r.sem }()
			r.runHandler(h, env, from, to, false, false, clock.Now()) // a broadcast is not recorded as a question; each agent gets its own payload
		}) {
			<-r.sem
			return n
		}
		n++
		ev := Event{Type: EvtMessageReceived, Time: clock.Now(), EnvelopeID: env.ID, Sender: from.Address(), Recipient: to.Address(),
			MessageType: env.Type, Path: PathBroadcast, Success: true, Peer: via, SourceTier: int(from.Tier), TargetTier: int(to.Tier)}
		r.o.sink.Emit(ev)
	}
	return n
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
	if len(r.h.Network().Peers()) > 0 && len(r.bc.topic.ListPeers()) == 0 {
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
