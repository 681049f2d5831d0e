package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/frame"
)

// handleStream serves one inbound /nova/a2a/1.0.0 stream. The goroutine
// belongs to libp2p; it only reads, checks, hands envelopes to the router's
// bounded handler pool and acknowledges. A malformed or oversized frame, a
// forged card or an out-of-place frame resets this stream only.
func (r *Router) handleStream(st network.Stream) {
	p := st.Conn().RemotePeer()
	pStr := p.String()
	if err := st.Scope().SetService(ServiceName); err != nil {
		r.log.Debugw("cannot attach stream to service", "peer", p, "err", err)
		_ = st.Reset()
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = st.Reset()
		return
	}
	r.inbound[st] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inbound, st)
		r.mu.Unlock()
	}()

	fr := frame.NewReader(st, r.o.maxFrame)
	bw := bufio.NewWriterSize(st, 16<<10)
	for {
		_ = st.SetReadDeadline(time.Now().Add(r.o.idleTimeout))
		body, err := fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = st.Close()
				return
			}
			r.refuseStream(st, p, err)
			return
		}
		m, err := decodeMsg(body)
		if err != nil {
			r.refuseStream(st, p, err)
			return
		}
		switch m.Kind {
		case kindHello:
			if err := r.acceptCards(p, m.Cards); err != nil {
				r.refuseStream(st, p, err)
				return
			}
		case kindEnvelope:
			reply := wireMsg{Kind: kindAck, Seq: m.Seq}
			if err := r.receive(p, pStr, m.Env); err != nil {
				reply = wireMsg{Kind: kindNack, Seq: m.Seq, Code: CodeOf(err), Msg: err.Error()}
			}
			b, err := encodeMsg(&reply)
			if err == nil {
				err = frame.Write(bw, b)
			}
			if err != nil {
				_ = st.Reset()
				return
			}
		default:
			r.refuseStream(st, p, fmt.Errorf("%w: frame kind %d is not sent to an inbound stream", ErrProtocol, m.Kind))
			return
		}
		if fr.Buffered() == 0 && bw.Buffered() > 0 {
			_ = st.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := bw.Flush(); err != nil {
				_ = st.Reset()
				return
			}
		}
	}
}

// refuseStream resets a stream whose peer broke the protocol, and says so.
func (r *Router) refuseStream(st network.Stream, p peer.ID, err error) {
	code := CodeProtocolError
	if c := CodeOf(err); c != CodeInternal {
		code = c
	}
	r.security(Event{Code: code, Detail: err.Error(), Peer: p})
	_ = st.Reset()
}

// acceptCards verifies the signed cards a peer presents for itself and
// merges them as remote cards. One forged card taints the whole hello.
func (r *Router) acceptCards(p peer.ID, cards [][]byte) error {
	var merged int
	for _, b := range cards {
		c, signer, err := agentcard.Open(b)
		if err != nil {
			return fmt.Errorf("card presented by %s refused: %w", shortID(p), err)
		}
		if signer != p {
			return &senderError{Sender: c.Address(), Peer: p, Reason: fmt.Sprintf("card signed by %s, presented by another peer", shortID(signer))}
		}
		changed, err := r.reg.MergeRemote(c)
		if err != nil {
			return fmt.Errorf("card %s from %s refused: %w", c.Address(), shortID(p), err)
		}
		if changed {
			merged++
		}
	}
	if merged > 0 {
		r.o.sink.Emit(Event{Type: EventCardsReceived, Time: time.Now(), Peer: p, Success: true, Detail: fmt.Sprintf("%d new or updated cards", merged), SourceTier: -1, TargetTier: -1})
	}
	return nil
}

// receive checks an envelope that arrived from peer p and delivers it. The
// node trusts nothing the sender's node did: attribution, tier and sandbox
// are decided here, from signed cards.
func (r *Router) receive(p peer.ID, pStr string, raw []byte) error {
	env, err := envelope.DecodeCBOR(raw)
	if err != nil {
		return err
	}
	from, err := r.attribute(p, pStr, env)
	if err != nil {
		r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient, MessageType: env.Type, Code: CodeOf(err), Detail: err.Error(), Peer: p, SourceTier: -1, TargetTier: -1})
		return err
	}
	if env.Recipient == envelope.Broadcast {
		return &deliveryError{Target: envelope.Broadcast, Reason: "broadcast frames are not accepted on direct streams"}
	}
	id, host, _ := strings.Cut(env.Recipient, "@")
	if host != "" && host != r.selfStr {
		return &agentcard.NotFoundError{Query: env.Recipient, Where: "agents hosted on node " + shortID(r.self)}
	}
	to, ok := r.reg.Get(id)
	if !ok || to.Origin != agentcard.OriginLocal {
		return &agentcard.NotFoundError{Query: env.Recipient, Where: fmt.Sprintf("the %d agents hosted on node %s", len(r.reg.Local()), shortID(r.self))}
	}
	reply := false
	if isAnswerType(env.Type) && env.CorrelationID != "" {
		r.mu.Lock()
		pr := r.pending[env.CorrelationID]
		reply = pr != nil && pr.from == to.Address() && pr.to == from.Address()
		r.mu.Unlock()
	}
	if err := r.checkPolicy(env, from, to, reply, p); err != nil {
		return err
	}
	return r.deliverLocal(env, from, to, p)
}

// attribute returns the signed card of env's sender, which peer p must host;
// the metadata's tier and sandbox must agree with that card.
func (r *Router) attribute(p peer.ID, pStr string, env *envelope.Envelope) (agentcard.Card, error) {
	_, host, qualified := strings.Cut(env.Sender, "@")
	if !qualified {
		return agentcard.Card{}, &senderError{Sender: env.Sender, Peer: p, Reason: "not a full agent address (name@peerID)"}
	}
	if host != pStr {
		return agentcard.Card{}, &senderError{Sender: env.Sender, Peer: p, Reason: "the sender is not hosted by the peer at the other end of the stream"}
	}
	c, ok := r.reg.Get(env.Sender)
	if !ok {
		return agentcard.Card{}, &senderError{Sender: env.Sender, Peer: p, Reason: "the peer has presented no signed card for this agent"}
	}
	if md := env.Metadata; md != nil && (md.Tier != uint8(c.Tier) || md.SandboxID != c.SandboxID) {
		return agentcard.Card{}, &senderError{Sender: env.Sender, Peer: p, Reason: fmt.Sprintf("metadata claims tier L%d sandbox %q, the signed card says %s sandbox %q", md.Tier, md.SandboxID, c.Tier, c.SandboxID)}
	}
	return c, nil
}

// helloFrames seals the local cards (cached per revision) into hello frames
// of at most ~half the frame limit each.
func (r *Router) helloFrames() ([][]byte, error) {
	local := r.reg.Local()
	r.mu.Lock()
	var blobs [][]byte
	for _, c := range local {
		sc, ok := r.sealed[c.ID]
		if !ok || sc.revision != c.Revision {
			r.mu.Unlock()
			data, err := agentcard.Seal(c, r.key)
			if err != nil {
				return nil, fmt.Errorf("protocol: seal card %s: %w", c.ID, err)
			}
			r.mu.Lock()
			sc = sealedCard{revision: c.Revision, data: data}
			r.sealed[c.ID] = sc
		}
		blobs = append(blobs, sc.data)
	}
	r.mu.Unlock()
	var frames [][]byte
	for len(blobs) > 0 || frames == nil {
		var batch [][]byte
		size := 0
		for len(blobs) > 0 && len(batch) < maxHelloCards && (len(batch) == 0 || size+len(blobs[0]) < r.o.maxFrame/2) {
			size += len(blobs[0])
			batch, blobs = append(batch, blobs[0]), blobs[1:]
		}
		b, err := encodeMsg(&wireMsg{Kind: kindHello, Cards: batch})
		if err != nil {
			return nil, err
		}
		frames = append(frames, b)
	}
	return frames, nil
}

// identifyLoop greets every peer that identify shows speaks /nova/a2a.
func (r *Router) identifyLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case e, ok := <-r.sub.Out():
			if !ok {
				return
			}
			evt := e.(event.EvtPeerIdentificationCompleted)
			if slices.Contains(evt.Protocols, IDA2A) {
				r.mu.Lock()
				r.greetLocked(evt.Peer)
				r.mu.Unlock()
			}
		}
	}
}

// greetLocked opens (in the background) the outbound stream to p, which
// starts with this node's hello. Caller holds r.mu.
func (r *Router) greetLocked(p peer.ID) {
	if r.closed || p == r.self {
		return
	}
	if s := r.out[p]; s != nil && !s.dead() {
		return
	}
	r.wg.Go(func() {
		if _, err := r.stream(r.ctx, p); err != nil {
			r.log.Debugw("greeting failed", "peer", p, "err", err)
		}
	})
}

// helloLoop re-announces the local cards so peers' registries keep them
// past their TTL.
func (r *Router) helloLoop() {
	t := time.NewTicker(r.o.helloInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.Announce()
		}
	}
}
