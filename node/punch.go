package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// punchAgain gives two nodes behind NAT that met over a relay before both
// could hole punch a second chance to go direct.
//
// go-libp2p punches (DCUtR) once per relayed connection: the end that
// received the connection starts it when the connection opens, if its
// hole punch service is ready then, and the other end must be ready to
// answer. A node's service is ready once a peer told it its public
// address, within seconds of its first connection; until then it neither
// starts a punch nor answers one (it does not speak /libp2p/dcutr). Two
// laptops that meet over a relay in those seconds (the relay was up when
// they joined) stay relayed for as long as that connection lasts.
//
// So the end that dialled the relayed connection watches it: when the
// connection's identify showed that one end could not punch, and both can
// now, it closes the relayed connection and dials again. The new relayed
// connection is one both ends are ready for, and the other end punches.
// Once per connection: a punch that failed (a symmetric NAT) is not tried
// again, since both ends were ready for it. And at most once per peer in
// punchAgainEvery: a peer that announces DCUtR only after each new
// connection's identify cannot make this node dial it over and over.
//
// It also closes relayed connections a direct one superseded, relayedGrace
// after both were there. go-libp2p leaves a relayed connection open beside
// the direct one a punch made, and the streams that were open on it (the
// router's, GossipSub's, the DHT's) keep crossing the relay. And a peer
// that reached a public node over a relay as well as directly is not taken
// as a relay by go-libp2p's relay client ("not a public node") while the
// relayed connection lasts: two public members dialling a laptop and each
// other could then leave the laptop with one relay where it wants two.
type punchAgain struct {
	h      host.Host
	sub    event.Subscription
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	dials  sync.WaitGroup

	// Owned by run: outbound relayed connections identified while one end
	// could not punch, by peer; peers with direct and relayed connections,
	// by when the relayed ones are closed.
	waiting    map[peer.ID]network.Conn
	superseded map[peer.ID]time.Time
	redialled  map[peer.ID]time.Time // within punchAgainEvery
	timer      *time.Timer
}

// punchAgainEvery is the least time between two redials of one peer.
const punchAgainEvery = 10 * time.Minute

// relayedGrace is how long a relayed connection stays open beside a direct
// one to the same peer: what was under way on it (a request, the hole
// punch's own exchange) has that long to end.
const relayedGrace = 3 * time.Second

// punchRedialTimeout bounds the dial after a relayed connection was closed
// for another try.
const punchRedialTimeout = 30 * time.Second

// startPunchAgain starts watching h's relayed connections.
func startPunchAgain(h host.Host) (*punchAgain, error) {
	sub, err := h.EventBus().Subscribe([]any{new(event.EvtPeerIdentificationCompleted), new(event.EvtPeerProtocolsUpdated),
		new(event.EvtLocalProtocolsUpdated), new(event.EvtPeerConnectednessChanged)}, eventbus.Name("nova hole punch again"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &punchAgain{h: h, sub: sub, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		waiting: map[peer.ID]network.Conn{}, superseded: map[peer.ID]time.Time{}, redialled: map[peer.ID]time.Time{},
		timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	go p.run()
	return p, nil
}

func (p *punchAgain) run() {
	defer close(p.done)
	defer p.timer.Stop()
	for {
		select {
		case e, ok := <-p.sub.Out():
			if !ok {
				return
			}
			p.handle(e)
		case <-p.timer.C:
			p.closeSuperseded()
		}
	}
}

func (p *punchAgain) handle(e any) {
	switch e := e.(type) {
	case event.EvtPeerIdentificationCompleted:
		p.supersede(e.Peer)
		c := e.Conn
		if c == nil || c.Stat().Direction != network.DirOutbound || !relayed(c) {
			return
		}
		if p.localReady() && slices.Contains(e.Protocols, holepunch.Protocol) {
			return // the other end punched when it opened, or will
		}
		p.waiting[e.Peer] = c
		p.check(e.Peer)
	case event.EvtPeerProtocolsUpdated:
		if slices.Contains(e.Added, holepunch.Protocol) {
			p.check(e.Peer)
		}
	case event.EvtLocalProtocolsUpdated:
		if slices.Contains(e.Added, holepunch.Protocol) {
			for id := range p.waiting {
				p.check(id)
			}
		}
	case event.EvtPeerConnectednessChanged:
		if e.Connectedness != network.Connected {
			delete(p.waiting, e.Peer)
			delete(p.superseded, e.Peer)
		}
	}
}

// supersede sets the relayed connections to id closing relayedGrace from
// now when id has a direct connection too.
func (p *punchAgain) supersede(id peer.ID) {
	if _, ok := p.superseded[id]; ok {
		return
	}
	conns := p.h.Network().ConnsToPeer(id)
	if !slices.ContainsFunc(conns, relayed) || !slices.ContainsFunc(conns, func(c network.Conn) bool { return !relayed(c) }) {
		return
	}
	p.superseded[id] = time.Now().Add(relayedGrace)
	p.arm()
}

// arm sets the timer for the first superseded peer due.
func (p *punchAgain) arm() {
	var first time.Time
	for _, due := range p.superseded {
		if first.IsZero() || due.Before(first) {
			first = due
		}
	}
	if first.IsZero() {
		return
	}
	p.timer.Reset(max(0, time.Until(first)))
}

// closeSuperseded closes the relayed connections of the peers due that
// still have a direct connection.
func (p *punchAgain) closeSuperseded() {
	now := time.Now()
	for id, due := range p.superseded {
		if due.After(now) {
			continue
		}
		delete(p.superseded, id)
		conns := p.h.Network().ConnsToPeer(id)
		if !slices.ContainsFunc(conns, func(c network.Conn) bool { return !relayed(c) }) {
			continue // the direct one went: the relay carries on
		}
		for _, c := range conns {
			if relayed(c) {
				log.Debugw("closing a relayed connection a direct one superseded", "peer", id, "addr", c.RemoteMultiaddr())
				_ = c.Close()
			}
		}
	}
	p.arm()
}

// localReady reports whether this node's hole punch service is ready.
func (p *punchAgain) localReady() bool {
	return slices.Contains(p.h.Mux().Protocols(), holepunch.Protocol)
}

// check closes the waiting relayed connection to id and dials id again
// once both ends can punch, unless a direct connection came meanwhile.
func (p *punchAgain) check(id peer.ID) {
	c, ok := p.waiting[id]
	if !ok {
		return
	}
	conns := p.h.Network().ConnsToPeer(id)
	if c.IsClosed() || slices.ContainsFunc(conns, func(c network.Conn) bool { return !relayed(c) }) {
		delete(p.waiting, id)
		return
	}
	if !p.localReady() || !supports(p.h, id, holepunch.Protocol) {
		return
	}
	delete(p.waiting, id)
	now := time.Now()
	for q, at := range p.redialled {
		if now.Sub(at) >= punchAgainEvery {
			delete(p.redialled, q)
		}
	}
	if _, recent := p.redialled[id]; recent {
		return
	}
	p.redialled[id] = now
	log.Infow("both ends can hole punch now: dialling the peer again over its relay", "peer", id)
	for _, c := range conns {
		_ = c.Close() // relayed, every one: a direct one would have ended the wait
	}
	p.dials.Go(func() {
		ctx, cancel := context.WithTimeout(p.ctx, punchRedialTimeout)
		defer cancel()
		if err := p.h.Connect(ctx, peer.AddrInfo{ID: id}); err != nil {
			log.Debugw("dialling the peer again for a hole punch", "peer", id, "err", err)
		}
	})
}

// supports reports whether the peerstore lists proto for id.
func supports(h host.Host, id peer.ID, proto protocol.ID) bool {
	ok, err := h.Peerstore().SupportsProtocols(id, proto)
	return err == nil && len(ok) > 0
}

// close stops watching and waits for the dials under way.
func (p *punchAgain) close() error {
	_ = p.sub.Close()
	<-p.done
	p.cancel()
	p.dials.Wait()
	return nil
}
