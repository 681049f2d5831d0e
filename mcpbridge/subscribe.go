package mcpbridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
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
	if mine[uri] {
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
	if mine == nil {
		mine = map[string]bool{}
		b.faceSubs[req.Session] = mine
	}
	mine[uri] = true
	return nil
}

// faceUnsubscribe answers resources/unsubscribe on the face.
func (b *Bridge) faceUnsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	uri := req.Params.URI
	if !b.faceSubs[req.Session][uri] {
		return nil
	}
	delete(b.faceSubs[req.Session], uri)
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
		delete(b.faceSubs, ss)
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

// peerUpdated relays a peer's notifications/resources/updated to the
// face's subscribers, if that peer serves the resource on the face.
func (b *Bridge) peerUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req.Params == nil {
		return
	}
	b.mu.Lock()
	p, known := b.byClient[req.Session]
	e, ok := b.face.resources[req.Params.URI]
	b.mu.Unlock()
	if !known || !ok || e.Local || e.peer != p {
		return
	}
	_ = b.agg.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI})
}

// localUpdated relays an update of a local resource to every peer session
// and to the face (the SDK sends it to the sessions that subscribed).
func (b *Bridge) localUpdated(uri string) {
	params := &mcp.ResourceUpdatedNotificationParams{URI: uri}
	for srv := range b.servedServers() {
		_ = srv.ResourceUpdated(b.ctx, params)
	}
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if ok && e.Local {
		_ = b.agg.ResourceUpdated(b.ctx, params)
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
