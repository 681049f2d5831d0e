package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions (resources/subscribe, resources/unsubscribe and
// notifications/resources/updated) across the mesh:
//
//   - a client of a face subscribes to a resource the face lists; the face
//     subscribes once upstream for all its sessions: to the registry for a
//     resource of this node, else on the node-to-node session to the peer
//     serving it (again after that session is redialled);
//   - a peer's session subscribes to the registry, for the caller in its
//     _meta, who must be allowed to call the resource's agent;
//   - the registry subscribes once to the backend serving the resource
//     (again after the backend restarts), and hands its updates to the
//     bridge, which notifies the face and every peer session (the SDK sends
//     each only to sessions that subscribed).
//
// Each face session and each peer session holds at most MaxSubscriptions.
//
// Order. A stdio backend's or a peer's update is taken as its connection
// reads it (notifyConn), so before the result that follows it; the
// registry writes it to the peer sessions then and there, so on their
// streams too it comes before that result. The face stamps each update it
// takes with the next number of updSeq, and each face session's
// subscription records the number it began at. One goroutine
// (deliverUpdates) sends the updates to the face's clients, and faceSend
// lets each reach only the sessions whose subscription began before its
// stamp and still holds. So a client that saw a call's result and then
// subscribed (again) is not told of an update that call made, however late
// it is sent; one that unsubscribed hears of no update after; and no
// goroutine that reads a connection waits for a face client.

// MaxSubscriptions bounds the resources one face session (a client of
// `nova-node mcp` or of /mcp), or one peer's node-to-node session, is
// subscribed to at once.
const MaxSubscriptions = 64

// CodeTooManySubscriptions: a session holds MaxSubscriptions subscriptions.
const CodeTooManySubscriptions = "TOO_MANY_SUBSCRIPTIONS"

type tooManySubscriptionsError struct{ URI string }

func (e *tooManySubscriptionsError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: cannot subscribe to %s: this session holds %d subscriptions, the most one session may; unsubscribe from one first",
		CodeTooManySubscriptions, e.URI, MaxSubscriptions)
}
func (e *tooManySubscriptionsError) Code() string { return CodeTooManySubscriptions }

// Subscriber turns the subscription of a resource's server to uri on or off.
type Subscriber func(ctx context.Context, uri string, on bool) error

// SetSubscriber sets (nil: removes) how to subscribe to the server of the
// resource uri. A resource without one may still be subscribed to; its
// updates come from [Registry.ResourceUpdated].
func (r *Registry) SetSubscriber(uri string, s Subscriber) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if s == nil {
		delete(r.subscribers, uri)
		return
	}
	if r.subscribers == nil {
		r.subscribers = map[string]Subscriber{}
	}
	r.subscribers[uri] = s
}

// SubscribeResource adds a subscriber to the local resource uri; the first
// subscribes its server. An unknown URI is RESOURCE_NOT_FOUND.
func (r *Registry) SubscribeResource(ctx context.Context, uri string) error {
	r.mu.RLock()
	_, ok := r.resources[uri]
	r.mu.RUnlock()
	if !ok {
		return &ResourceNotFoundError{URI: uri}
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.subs[uri] == 0 {
		if s := r.subscribers[uri]; s != nil {
			if err := s(ctx, uri, true); err != nil {
				return err
			}
		}
	}
	r.updMu.Lock()
	if r.subs == nil {
		r.subs = map[string]int{}
	}
	r.subs[uri]++
	r.updMu.Unlock()
	return nil
}

// UnsubscribeResource removes a subscriber of uri; the last unsubscribes
// its server.
func (r *Registry) UnsubscribeResource(ctx context.Context, uri string) error {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.subs[uri] == 0 {
		return nil
	}
	r.updMu.Lock()
	r.subs[uri]--
	last := r.subs[uri] == 0
	if last {
		delete(r.subs, uri)
	}
	r.updMu.Unlock()
	if !last {
		return nil
	}
	if s := r.subscribers[uri]; s != nil {
		return s(ctx, uri, false)
	}
	return nil
}

// OnResourceUpdated sets a function called (outside the lock) when a
// subscribed resource changed.
func (r *Registry) OnResourceUpdated(f func(uri string)) {
	r.updMu.Lock()
	r.onUpdated = f
	r.updMu.Unlock()
}

// ResourceUpdated reports that the local resource uri changed: its
// subscribers are notified. A server's notification calls it; so may a Go
// program for the resources it registers. It never waits for a server
// being (un)subscribed, so a backend's notification may call it on the
// goroutine that reads the answer to that (un)subscribe.
func (r *Registry) ResourceUpdated(uri string) {
	r.updMu.Lock()
	f, n := r.onUpdated, r.subs[uri]
	r.updMu.Unlock()
	if f != nil && n > 0 {
		f(uri)
	}
}

// subscribe is the Subscriber of a backend's resources: the wish
// is kept, so that a restarted server is subscribed again.
func (b *Backend) subscribe(ctx context.Context, uri string, on bool) error {
	b.mu.Lock()
	if on {
		b.subs[uri] = true
	} else {
		delete(b.subs, uri)
	}
	cs := b.cs
	b.mu.Unlock()
	if cs == nil {
		return nil // subscribed when the server is back
	}
	if on {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
}

// resubscribe subscribes a new session of the server to what was
// subscribed before.
func (b *Backend) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	b.mu.Lock()
	uris := keys(b.subs)
	b.mu.Unlock()
	for _, u := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			log.Debugw("MCP server refused a subscription", "agent", b.agent, "server", b.name, "uri", u, "err", err)
		}
	}
}

// updated hands an update of the server's resource uri to the registry.
func (b *Backend) updated(uri string) {
	b.mu.Lock()
	ours := b.uris[uri]
	b.mu.Unlock()
	if ours {
		b.reg.ResourceUpdated(uri)
	}
}

// subscribes reports whether the server offers resource subscriptions.
func subscribes(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil && init.Capabilities.Resources.Subscribe
}

// faceSubscribe answers resources/subscribe on the face: a resource the
// face lists, at most MaxSubscriptions per session, subscribed upstream
// once for every session.
func (b *Bridge) faceSubscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	b.ensureFresh(ctx)
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if !ok {
		return resourceNotFound(uri)
	}
	b.subMu.Lock()
	defer b.subMu.Unlock()
	b.pruneFaceSubs()
	mine := b.faceSubs[req.Session]
	if _, ok := mine[uri]; ok {
		return nil
	}
	if len(mine) >= MaxSubscriptions {
		return RPCError(&tooManySubscriptionsError{URI: uri})
	}
	if b.upSubs[uri] == 0 {
		if err := b.subscribeUp(ctx, e, true); err != nil {
			return RPCError(err)
		}
	}
	b.upSubs[uri]++
	b.faceMu.Lock()
	if mine == nil {
		mine = map[string]uint64{}
		b.faceSubs[req.Session] = mine
	}
	mine[uri] = b.updSeq.Load() // updates taken so far are from before it
	b.faceMu.Unlock()
	return nil
}

// faceUnsubscribe answers resources/unsubscribe on the face.
func (b *Bridge) faceUnsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	uri := req.Params.URI
	if _, ok := b.faceSubs[req.Session][uri]; !ok {
		return nil
	}
	b.faceMu.Lock()
	delete(b.faceSubs[req.Session], uri) // no update reaches it from now on
	b.faceMu.Unlock()
	return b.dropUp(ctx, uri)
}

// dropUp ends one face session's subscription to uri; the last ends the
// upstream one. Under subMu.
func (b *Bridge) dropUp(ctx context.Context, uri string) error {
	b.upSubs[uri]--
	if b.upSubs[uri] > 0 {
		return nil
	}
	delete(b.upSubs, uri)
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if !ok {
		return nil
	}
	if err := b.subscribeUp(ctx, e, false); err != nil {
		return RPCError(err)
	}
	return nil
}

// pruneFaceSubs ends the subscriptions of face sessions that are gone (the
// SDK forgets a closed session's subscriptions without telling). Under
// subMu.
func (b *Bridge) pruneFaceSubs() {
	live := map[*mcp.ServerSession]bool{}
	for ss := range b.agg.Sessions() {
		live[ss] = true
	}
	for ss, uris := range b.faceSubs {
		if live[ss] {
			continue
		}
		b.faceMu.Lock()
		delete(b.faceSubs, ss)
		b.faceMu.Unlock()
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		for u := range uris {
			_ = b.dropUp(ctx, u)
		}
		cancel()
	}
}

// subscribeUp subscribes the face to (or unsubscribes it from) the
// resource of e: in the registry, as the face's agent, or on e's peer.
func (b *Bridge) subscribeUp(ctx context.Context, e Entry, on bool) error {
	as := b.cfg.As()
	if e.Local {
		if !on {
			return b.reg.UnsubscribeResource(ctx, e.remote)
		}
		agent := strings.SplitN(e.Agent, "@", 2)[0]
		if err := b.authorize(b.self, as, agent); err != nil {
			return err
		}
		return b.reg.SubscribeResource(ctx, e.remote)
	}
	pc, err := b.acquire(ctx, e.peer)
	if err != nil {
		return err
	}
	defer b.end(e.peer, pc)
	if on {
		return pc.cs.Subscribe(ctx, &mcp.SubscribeParams{Meta: mcp.Meta{MetaCaller: as}, URI: e.remote})
	}
	return pc.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{Meta: mcp.Meta{MetaCaller: as}, URI: e.remote})
}

// resubscribePeer subscribes a new session to p to the face's
// subscriptions of resources p serves.
func (b *Bridge) resubscribePeer(ctx context.Context, p peer.ID, cs *mcp.ClientSession) {
	b.subMu.Lock()
	uris := make([]string, 0, len(b.upSubs))
	for u := range b.upSubs {
		uris = append(uris, u)
	}
	b.subMu.Unlock()
	as := b.cfg.As()
	for _, u := range uris {
		b.mu.Lock()
		e, ok := b.face.resources[u]
		b.mu.Unlock()
		if !ok || e.Local || e.peer != p {
			continue
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{Meta: mcp.Meta{MetaCaller: as}, URI: e.remote}); err != nil {
			log.Debugw("peer refused a subscription", "peer", p, "uri", u, "err", err)
		}
	}
}

// methodResourceUpdated is the notification of a subscribed resource's
// change.
const methodResourceUpdated = "notifications/resources/updated"

// updatedURI is the URI a notifications/resources/updated names ("" when
// its params are not those of one).
func updatedURI(r *jsonrpc.Request) string {
	var p mcp.ResourceUpdatedNotificationParams
	if json.Unmarshal(r.Params, &p) != nil {
		return ""
	}
	return p.URI
}

// peerUpdated takes peer p's notifications/resources/updated of uri, as
// the connection reads it, for the face's subscribers, if p serves the
// resource on the face.
func (b *Bridge) peerUpdated(p peer.ID, uri string) {
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if ok && !e.Local && e.peer == p {
		b.faceUpdated(uri)
	}
}

// localUpdated relays an update of a local resource to every peer session
// (the SDK sends it to the sessions that subscribed) and to the face. It
// writes to the peers' streams before it returns, so that an update a
// backend sent before a call's result reaches the calling peer before
// that result (each write takes at most streamWriteTimeout).
func (b *Bridge) localUpdated(uri string) {
	params := &mcp.ResourceUpdatedNotificationParams{URI: uri}
	for srv := range b.servedServers() {
		_ = srv.ResourceUpdated(b.ctx, params)
	}
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if ok && e.Local {
		b.faceUpdated(uri)
	}
}

// updateQueue holds the face's updates not yet sent, one per URI: a
// later update of a URI waiting takes its stamp (one notification tells
// of both), so the queue never holds more than the face lists.
type updateQueue struct {
	mu    sync.Mutex
	order []string          // URIs waiting, in the order they came
	stamp map[string]uint64 // uri -> stamp of its latest update
	kick  chan struct{}     // capacity 1: updates are waiting
}

// metaStamp is the _meta key under which deliverUpdates hands an update's
// stamp to faceSend, which takes it off: it never reaches a client.
const metaStamp = "nova/update"

// faceUpdated stamps an update of the face's resource uri and queues it
// for the face's clients, without waiting for them.
func (b *Bridge) faceUpdated(uri string) {
	q := &b.updates
	q.mu.Lock()
	if _, waiting := q.stamp[uri]; !waiting {
		q.order = append(q.order, uri)
	}
	q.stamp[uri] = b.updSeq.Add(1)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// deliverUpdates sends the face's queued updates, in the order they came,
// until the bridge closes (Close ends the face's sessions, so no write
// keeps it).
func (b *Bridge) deliverUpdates() {
	q := &b.updates
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-q.kick:
		}
		q.mu.Lock()
		order, stamp := q.order, q.stamp
		q.order, q.stamp = nil, map[string]uint64{}
		q.mu.Unlock()
		for _, uri := range order {
			_ = b.agg.ResourceUpdated(b.ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: mcp.Meta{metaStamp: stamp[uri]}})
		}
	}
}

// faceSend is the face's sending middleware: an update goes to a session
// only if the session's subscription to its URI began before the
// update's stamp and still holds, without the stamp.
func (b *Bridge) faceSend(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodResourceUpdated {
			return next(ctx, method, req)
		}
		p, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if p == nil || ss == nil {
			return nil, nil
		}
		stamp, _ := p.Meta[metaStamp].(uint64)
		b.faceMu.Lock()
		began, subscribed := b.faceSubs[ss][p.URI]
		b.faceMu.Unlock()
		if !subscribed || stamp <= began {
			return nil, nil
		}
		q := *p
		q.Meta = maps.Clone(p.Meta) // shared by every session's request
		delete(q.Meta, metaStamp)
		if len(q.Meta) == 0 {
			q.Meta = nil
		}
		return next(ctx, method, &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ss, Params: &q})
	}
}

// peerSubs is what one peer session is subscribed to.
type peerSubs struct {
	uris map[string]bool
}

// peerSubscribe answers resources/subscribe from peer p for the caller in
// its _meta: a local resource whose agent the caller may call, at most
// MaxSubscriptions per session.
func (b *Bridge) peerSubscribe(p peer.ID, ps *peerSubs) func(context.Context, *mcp.SubscribeRequest) error {
	return func(ctx context.Context, req *mcp.SubscribeRequest) error {
		uri := req.Params.URI
		agent := ""
		for _, r := range b.reg.ListResources() {
			if r.URI == uri {
				agent = r.Agent
				break
			}
		}
		if agent == "" {
			return resourceNotFound(uri)
		}
		if err := b.authorize(p, metaCaller(req), agent); err != nil {
			return RPCError(err)
		}
		b.subMu.Lock()
		defer b.subMu.Unlock()
		if ps.uris[uri] {
			return nil
		}
		if len(ps.uris) >= MaxSubscriptions {
			return RPCError(&tooManySubscriptionsError{URI: uri})
		}
		if err := b.reg.SubscribeResource(ctx, uri); err != nil {
			return RPCError(err)
		}
		ps.uris[uri] = true
		return nil
	}
}

// peerUnsubscribe answers resources/unsubscribe from a peer.
func (b *Bridge) peerUnsubscribe(ps *peerSubs) func(context.Context, *mcp.UnsubscribeRequest) error {
	return func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		b.subMu.Lock()
		defer b.subMu.Unlock()
		if !ps.uris[req.Params.URI] {
			return nil
		}
		delete(ps.uris, req.Params.URI)
		return b.reg.UnsubscribeResource(ctx, req.Params.URI)
	}
}

// endPeerSubs ends a finished peer session's subscriptions.
func (b *Bridge) endPeerSubs(ps *peerSubs) {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	for u := range ps.uris {
		_ = b.reg.UnsubscribeResource(b.ctx, u)
	}
	ps.uris = map[string]bool{}
}
