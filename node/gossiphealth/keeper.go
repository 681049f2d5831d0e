package gossiphealth

import (
	"context"
	"sync"
	"time"

	golog "github.com/ipfs/go-log/v2"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

var log = golog.Logger("nova/gossiphealth")

// Settle is how long after its outbound stream to a still connected peer
// died GossipSub's new stream to that peer is held: longer than the peer
// takes to see its own stream reset and forget this node's subscriptions
// (a round trip and a turn of its event loop), so that the hello on the
// new stream comes after.
const Settle = 2 * time.Second

// Keeper repairs GossipSub's view of peers whose pubsub stream died while
// they stayed connected (see the package doc). Its methods are safe for
// concurrent use.
type Keeper struct {
	h      host.Host
	settle time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	protos map[protocol.ID]bool // GossipSub's protocols, as it registers them
	hold   map[peer.ID]time.Time
	closed bool
}

// New returns a Keeper for h, with [Settle] as its hold.
func New(h host.Host) *Keeper { return newKeeper(h, Settle) }

func newKeeper(h host.Host, settle time.Duration) *Keeper {
	ctx, cancel := context.WithCancel(context.Background())
	return &Keeper{h: h, settle: settle, ctx: ctx, cancel: cancel,
		protos: map[protocol.ID]bool{}, hold: map[peer.ID]time.Time{}}
}

// Host returns h for GossipSub: the Keeper learns pubsub's protocols from
// its stream handlers and holds its new streams to a peer as the package
// doc says. Every other method is h's.
func (k *Keeper) Host(h host.Host) host.Host { return &pubsubHost{Host: h, k: k} }

// Option is the GossipSub option that reports pubsub's closed outbound
// streams to the Keeper.
func (k *Keeper) Option() pubsub.Option { return pubsub.WithRawTracer(tracer{k}) }

// Close stops the Keeper: held streams open at once (or fail, when
// GossipSub is closing), and Close waits for the resets under way.
// Idempotent.
func (k *Keeper) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	return nil
}

// outboundClosed is pubsub's report, from its event loop, that its
// outbound stream to p is gone. It must not block.
func (k *Keeper) outboundClosed(p peer.ID) {
	if k.h.Network().Connectedness(p) != network.Connected {
		return // gone: pubsub starts afresh when it connects again
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	for q, until := range k.hold {
		if !now.Before(until) {
			delete(k.hold, q)
		}
	}
	k.hold[p] = now.Add(k.settle)
	protos := make(map[protocol.ID]bool, len(k.protos))
	for id := range k.protos {
		protos[id] = true
	}
	k.wg.Go(func() { k.resetInbound(p, protos, now) })
}

// resetInbound resets p's pubsub streams to this node opened before
// since: the peer opens a new one and sends its subscriptions on it.
func (k *Keeper) resetInbound(p peer.ID, protos map[protocol.ID]bool, since time.Time) {
	n := 0
	for _, c := range k.h.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			st := s.Stat()
			if st.Direction == network.DirInbound && protos[s.Protocol()] && st.Opened.Before(since) {
				_ = s.Reset()
				n++
			}
		}
	}
	log.Debugw("pubsub stream to a connected peer closed: its subscriptions asked for again", "peer", p, "reset", n)
}

// wait blocks until GossipSub may open a stream to p, or ctx or the
// Keeper ends.
func (k *Keeper) wait(ctx context.Context, p peer.ID) error {
	k.mu.Lock()
	until, ok := k.hold[p]
	k.mu.Unlock()
	if !ok {
		return nil
	}
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-k.ctx.Done():
		return nil
	}
}

func (k *Keeper) addProtocol(id protocol.ID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.protos[id] = true
}

type pubsubHost struct {
	host.Host
	k *Keeper
}

func (h *pubsubHost) SetStreamHandler(id protocol.ID, handler network.StreamHandler) {
	h.k.addProtocol(id)
	h.Host.SetStreamHandler(id, handler)
}

func (h *pubsubHost) SetStreamHandlerMatch(id protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.k.addProtocol(id)
	h.Host.SetStreamHandlerMatch(id, match, handler)
}

func (h *pubsubHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	if err := h.k.wait(ctx, p); err != nil {
		return nil, err
	}
	return h.Host.NewStream(ctx, p, pids...)
}

// tracer is the pubsub.RawTracer that tells the Keeper of closed outbound
// streams; the rest it ignores.
type tracer struct{ k *Keeper }

func (t tracer) OnClosedOutboundStream(p peer.ID)       { t.k.outboundClosed(p) }
func (tracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (tracer) Join(string)                              {}
func (tracer) Leave(string)                             {}
func (tracer) Graft(peer.ID, string)                    {}
func (tracer) Prune(peer.ID, string)                    {}
func (tracer) ValidateMessage(*pubsub.Message)          {}
func (tracer) DeliverMessage(*pubsub.Message)           {}
func (tracer) RejectMessage(*pubsub.Message, string)    {}
func (tracer) DuplicateMessage(*pubsub.Message)         {}
func (tracer) ThrottlePeer(peer.ID)                     {}
func (tracer) RecvRPC(*pubsub.RPC)                      {}
func (tracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (tracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (tracer) UndeliverableMessage(*pubsub.Message)     {}
