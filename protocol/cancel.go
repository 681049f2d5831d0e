package protocol

import (
	"context"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
)

// Cancellation of a request whose requester stopped waiting (its context
// ended: a caller gave up, an A2A client canceled the task): the handler
// running it, on this node or on the recipient's, sees its context
// canceled, so that work nobody waits for stops (an A2A backend behind an
// a2aUrl agent is told to cancel its task). Best effort: a request still
// queued when the cancel arrives runs anyway, and a node that does not
// state featCancel in its hello is sent nothing.

// runKey names a running request: its sender (canonical address) and id.
type runKey struct{ from, id string }

// startRun registers the handler context of request env from the agent
// at canonical address from.
func (r *Router) startRun(from string, env *envelope.Envelope, ctx *handlerCtx) runKey {
	k := runKey{from: from, id: env.ID}
	r.runMu.Lock()
	if r.runningReqs == nil {
		r.runningReqs = map[runKey]*handlerCtx{}
	}
	r.runningReqs[k] = ctx
	r.runMu.Unlock()
	return k
}

func (r *Router) endRun(k runKey, ctx *handlerCtx) {
	r.runMu.Lock()
	if r.runningReqs[k] == ctx {
		delete(r.runningReqs, k)
	}
	r.runMu.Unlock()
}

// cancelRun ends the context of the handler running request k, if any.
func (r *Router) cancelRun(k runKey) bool {
	r.runMu.Lock()
	ctx := r.runningReqs[k]
	r.runMu.Unlock()
	if ctx == nil {
		return false
	}
	ctx.end(context.Canceled)
	return true
}

// cancelFromPeer takes a cancel frame from p: only for a request of an
// agent p hosts.
func (r *Router) cancelFromPeer(p peer.ID, from, id string) {
	if _, host, ok := strings.Cut(from, "@"); !ok || host != p.String() {
		r.log.Debugw("cancel for an agent the peer does not host ignored", "peer", p, "from", from)
		return
	}
	if r.cancelRun(runKey{from: from, id: id}) {
		r.o.sink.Emit(Event{Type: EvtRouteDecided, Time: clock.Now(), EnvelopeID: id, Sender: from, Peer: p,
			Detail: "request canceled by its sender", SourceTier: -1, TargetTier: -1})
	}
}

// cancelRequest tells the handler of request id, sent by the agent at
// canonical address from to an agent of host toHost, that its sender
// stopped waiting.
func (r *Router) cancelRequest(from, id, toHost string) {
	k := runKey{from: from, id: id}
	if toHost == r.selfStr {
		r.cancelRun(k)
		return
	}
	p, err := peer.Decode(toHost)
	if err != nil {
		return
	}
	if mark, ok := r.rosters.get(p); !ok || mark.feat&featCancel == 0 {
		return // an older node would take the frame for a protocol error
	}
	b, err := encodeMsg(&wireMsg{Kind: kindCancel, From: from, ID: id})
	if err != nil {
		return
	}
	r.spawn(func() {
		r.mu.Lock()
		s := r.out[p]
		r.mu.Unlock()
		if s != nil && !s.dead() {
			_ = s.write([][]byte{b}, true)
		}
	})
}
