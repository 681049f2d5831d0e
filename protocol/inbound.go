package protocol

import (
	"container/list"
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
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/streamscope"
)

// handleStream serves one inbound /nova/a2a/1.0.0 stream. It reads,
// checks and queues envelopes on their channel, whose work delivers them in
// order, and answers opens. A malformed or oversized frame, a forged card or
// an out-of-place frame resets this stream only.
//
// The goroutine libp2p starts here counts as a Router goroutine (Close
// waits for it): when a frame needs a channel's work started, the reading
// moves to a Router worker and this goroutine does the work itself (see
// inReader.run), so a request's handler starts without a hand-off.
func (r *Router) handleStream(st network.Stream) {
	p := st.Conn().RemotePeer()
	if err := st.Scope().SetService(ServiceName); err != nil {
		r.log.Debugw("cannot attach stream to service", "peer", p, "err", err)
		_ = st.Reset()
		return
	}
	mem, err := streamscope.Reserve(st.Scope(), inStreamBuffers)
	if err != nil {
		r.log.Debugw("cannot reserve memory for inbound stream", "peer", p, "err", err)
		_ = st.Reset()
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		mem.Release()
		_ = st.Reset()
		return
	}
	out := newInStream(r, st)
	r.inbound[st] = out
	r.wg.Add(1)
	r.mu.Unlock()
	defer r.wg.Done()
	rd := &inReader{r: r, st: st, p: p, pStr: p.String(), mem: mem, out: out,
		fr: frame.NewReader(st, r.o.maxFrame)}
	rd.resume = rd.run
	rd.run()
}

// The buffers of an inbound stream, reserved in its resource scope from
// its start: the frame reader's read buffer and the inStream's writer
// (inWriters' size). The frame body buffer is reserved as it grows
// (inReader.reserve). The reservations are worst cases: an idle stream
// holds none of these buffers (the reader gives its buffers back between
// frames, see frame.Reader; the writer holds one only while acks wait in
// it), but the resource manager keeps them reserved for the stream's life,
// so that a stream that becomes busy never fails for memory it had.
const (
	inReadBuffer    = 4 << 10
	inWriteBuffer   = 4 << 10
	inStreamBuffers = inReadBuffer + inWriteBuffer
)

// inReader is the reading side of an inbound stream: the loop's state,
// which moves between goroutines with the reading (never two at once).
type inReader struct {
	r      *Router
	st     network.Stream
	p      peer.ID
	pStr   string
	fr     *frame.Reader
	out    *inStream
	last   *inChannel // a stream mostly carries one channel: the last one
	idle   deadline
	mem    *streamscope.Memory // released by end
	body   int                 // frame body bytes reserved in mem: the largest frame so far, rounded up
	read   bool                // a frame arrived: the idle timeout replaces firstFrameTimeout
	reuse  inMsg               // every canonical envelope frame is decoded into it
	resume func()              // rd.run, made once: a method value per hand-off is an allocation
}

// run reads frames until the stream ends, or until a lone question (a
// request or proposal, with nothing behind it in the stream) needs its
// channel's work started: then a Router worker goes on reading (a new run)
// and this goroutine does the work and returns, so the handler, whose
// answer someone waits for, starts without a hand-off. Other work goes to
// a worker while this goroutine keeps reading: in a burst the reader is
// the busy stage, and moving it would stall the stream behind the work.
func (rd *inReader) run() {
	r := rd.r
	for {
		if rd.read {
			rd.idle.extend(r.o.idleTimeout, rd.st.SetReadDeadline)
		} else {
			rd.idle.extend(min(firstFrameTimeout, r.o.idleTimeout), rd.st.SetReadDeadline)
		}
		body, err := rd.fr.Next()
		now := clock.Now() // when the frame arrived: its received event's time
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				_ = rd.st.Close()
			case errors.Is(err, frame.ErrTooLarge), errors.Is(err, frame.ErrMalformed):
				r.refuseStream(rd.st, rd.p, err) // the peer broke the framing
			default:
				// The transport ended (a reset by a peer that stops, a
				// connection closed, the idle deadline): no peer lied, so
				// no security event, or every node that stops would leave
				// one in its peers' audit logs.
				r.log.Debugw("inbound stream ended", "peer", rd.p, "err", err)
				if !rd.out.closedAtClose.Load() { // else its last acks are still on their way
					_ = rd.st.Reset()
				}
			}
			rd.end()
			return
		}
		rd.read = true
		if len(body) > rd.body && !rd.reserve(len(body)) {
			_ = rd.st.Reset()
			rd.end()
			return
		}
		ic, ask, err := rd.frame(body, now)
		if err != nil {
			r.refuseStream(rd.st, rd.p, err)
			rd.end()
			return
		}
		if rd.fr.Buffered() == 0 {
			rd.out.flush()
		}
		if ic == nil {
			continue
		}
		if ask && rd.fr.Buffered() == 0 && r.goWork(rd.resume) {
			r.work(ic)
			return
		}
		if !r.goWork(func() { r.work(ic) }) {
			// Closing: the work would find the Router closed anyway.
			ic.mu.Lock()
			ic.running = false
			ic.mu.Unlock()
		}
	}
}

// reserve grows the stream's reservation to hold a frame body of n bytes,
// rounded up to 4 KiB so that a stream of slowly growing frames does not
// ask the resource manager at every frame. The reservation is the largest
// frame's until the stream ends: a worst case, as the reader keeps its body
// buffer only while frames keep coming. It reports false when the resource
// manager refuses.
func (rd *inReader) reserve(n int) bool {
	n = (n + 4<<10 - 1) &^ (4<<10 - 1)
	if err := rd.mem.Grow(inStreamBuffers + n); err != nil {
		rd.r.log.Debugw("cannot reserve memory for inbound frame", "peer", rd.p, "bytes", n, "err", err)
		return false
	}
	rd.body = n
	return true
}

// end releases the stream once its reading is over.
func (rd *inReader) end() {
	rd.mem.Release()
	rd.out.close()
	rd.r.mu.Lock()
	delete(rd.r.inbound, rd.st)
	rd.r.mu.Unlock()
}

// frame handles one frame. It returns the channel whose work must be
// started (see Router.accept) and whether the envelope that starts it asks
// for an answer, or an error that ends the stream.
func (rd *inReader) frame(body []byte, at time.Time) (ic *inChannel, ask bool, err error) {
	r, p, pStr, out := rd.r, rd.p, rd.pStr, rd.out
	lastCh := ""
	if rd.last != nil {
		lastCh = rd.last.id
	}
	m, err := decodeMsgReuse(body, &rd.reuse, lastCh)
	if err != nil {
		return nil, false, err
	}
	switch m.Kind {
	case kindHello:
		if len(m.Auth) > 0 && r.o.auth != nil {
			r.acceptAuthority(p, m.Auth)
		}
		if err := r.acceptCards(p, m.Cards); err != nil {
			return nil, false, err
		}
		if m.Full {
			r.retainCards(p, m.Roster, rosterMark{boot: m.Boot, seq: m.Seq, feat: m.Feat})
		}
		return nil, false, nil
	case kindCancel:
		r.cancelFromPeer(p, m.From, m.ID)
		return nil, false, nil
	case kindOpen:
		w, taken, err := r.openIn(p, pStr, m, out)
		if err != nil {
			out.send(&wireMsg{Kind: kindNack, Ch: m.Ch, Code: CodeOf(err), Msg: err.Error()}, false)
		} else {
			out.send(&wireMsg{Kind: kindOpened, Ch: m.Ch, W: w, Seq: taken}, false)
		}
		return nil, false, nil
	case kindEnvelope:
		// inChans entries are never replaced, only created.
		ic = rd.last
		if ic == nil || ic.id != m.Ch {
			r.mu.Lock()
			ic = r.inChans[pStr+"/"+m.Ch]
			r.mu.Unlock()
			rd.last = ic
		}
		if ic == nil || ic.evicted.Load() {
			err := &deliveryError{Target: m.Ch, Reason: "unknown channel: open it first"}
			out.send(&wireMsg{Kind: kindNack, Ch: m.Ch, Seq: m.Seq, Code: CodeChannelClosed, Msg: err.Error()}, false)
			return nil, false, nil
		}
		ic.mu.Lock()
		dup := m.Seq <= ic.queued
		backlog := len(ic.queue)
		ic.mu.Unlock()
		if !dup && backlog >= maxPending {
			// A sender keeps at most maxPending envelopes unacknowledged,
			// and the queue holds only unacknowledged ones: this peer
			// ignores the bound, and would grow the queue without one.
			return nil, false, fmt.Errorf("%w: more than %d envelopes unacknowledged on channel %s", ErrProtocol, maxPending, m.Ch)
		}
		it := inItem{seq: m.Seq, ackNow: m.Ack, at: at}
		if !dup {
			// The canonical decoder read m.env from m.Env: unless receive
			// makes its recipient canonical, m.Env is its encoding, which
			// the thread index copies now (the reader's buffer is reused).
			canonical, rcpt := m.env != nil, ""
			if canonical {
				rcpt = m.env.Recipient
			}
			it.env, it.err = r.receive(p, pStr, ic, m.Env, m.env)
			if it.err == nil {
				it.answer = it.env.Type.AsksForAnswer() || isAnswerType(it.env.Type)
				if canonical && it.env.Recipient == rcpt {
					r.recordEncoded(it.env, m.Env)
				} else {
					r.recordThread(it.env)
				}
			}
		}
		if r.accept(ic, out, it) {
			return ic, it.env != nil && it.err == nil && it.env.Type.AsksForAnswer(), nil
		}
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%w: frame kind %d is not sent to an inbound stream", ErrProtocol, m.Kind)
}

// openIn accepts a channel from agent m.From (hosted by p) to local agent
// m.To, opened on stream out, and returns the channel's watermark (the
// highest sequence handled) and the highest sequence it has taken into its
// queue: a sender restarted from its outbox numbers on past both.
func (r *Router) openIn(p peer.ID, pStr string, m *inMsg, out *inStream) (w, taken uint64, err error) {
	from, err := r.attributeAddr(p, pStr, m.From)
	if err != nil {
		r.security(Event{Sender: m.From, Recipient: m.To, Code: CodeOf(err), Detail: err.Error(), Peer: p, SourceTier: -1, TargetTier: -1})
		return 0, 0, err
	}
	to, err := r.localRecipient(m.To)
	if err != nil {
		return 0, 0, err
	}
	key := pStr + "/" + m.Ch
	r.mu.Lock()
	w, taken, drop, err := r.openInLocked(p, key, m, from, to, out)
	r.mu.Unlock()
	r.forgetMarks(drop)
	return w, taken, err
}

// openInLocked is openIn's part under r.mu. drop lists the watermarks it
// forgot, for the caller to delete from the store once r.mu is released.
func (r *Router) openInLocked(p peer.ID, key string, m *inMsg, from, to agentcard.Card, out *inStream) (w, taken uint64, drop []string, err error) {
	if ic := r.inChans[key]; ic != nil {
		if c := ic.cards.Load(); c.from.Address() != from.Address() || c.to.Address() != to.Address() {
			return 0, 0, nil, &senderError{Sender: m.From, Peer: p, Reason: "channel id reused for another agent pair"}
		}
		ic.cards.Store(&inCards{from, to}) // refreshed cards
		ic.mu.Lock()
		ic.out = out // its stream now, which keeps it from eviction
		w, taken = ic.watermark, ic.queued
		ic.mu.Unlock()
		return w, taken, nil, nil
	}
	pc, drop := r.peerChansLocked(p)
	now := clock.Now()
	if len(pc.chans) >= maxInChannelsPerPeer && now.Sub(pc.scanned) >= time.Second {
		// A scan at most once a second per peer: one that keeps every
		// channel busy must not make each of its open frames cost one.
		pc.scanned = now
		drop = append(drop, r.evictIdleLocked(pc)...)
	}
	if len(pc.chans) >= maxInChannelsPerPeer {
		return 0, 0, drop, fmt.Errorf("%w: peer %s has %d channels open to this node, the most it may", ErrProtocol, shortID(p), maxInChannelsPerPeer)
	}
	r.inByPeer[p] = pc // again, if the eviction emptied it
	if len(r.inChans) >= maxInChannels {
		// The node is full: the peer holding the most channels gives up
		// its idle ones (once a second, as above).
		if big := r.busiestPeerLocked(); big != nil && now.Sub(big.scanned) >= time.Second {
			big.scanned = now
			drop = append(drop, r.evictIdleLocked(big)...)
		}
		if len(r.inChans) >= maxInChannels {
			if len(pc.chans) == 0 && pc.marks.Len() == 0 {
				delete(r.inByPeer, p)
			}
			return 0, 0, drop, fmt.Errorf("%w: this node holds %d inbound channels, the most it keeps; retry later", ErrProtocol, maxInChannels)
		}
	}
	ic := &inChannel{key: key, id: m.Ch, watermark: r.watermarks[key], out: out}
	pc.unmarkLocked(r, key) // the channel holds its watermark from here on
	ic.cards.Store(&inCards{from, to})
	ic.queued = ic.watermark
	r.inChans[key] = ic
	pc.chans[key] = ic
	return ic.watermark, ic.queued, drop, nil
}

// Bounds of the inbound channels and of their remembered watermarks.
//
// A channel is an agent pair, and an honest peer opens one per pair of its
// agents and ours, once per run of its node or after giving up on a
// redial (a restarted sender reuses the channels in its outbox and opens
// new ones for the rest); a peer opening fresh channel IDs without end
// would grow this node's channel table, and its table of watermarks in
// memory and in the store, without bound.
//
//   - maxInChannelsPerPeer channels of one peer are held at once. At the
//     bound, the peer's idle channels are evicted (evictIdleLocked): their
//     watermarks are remembered, so a sender that reopens one later finds
//     its duplicates recognised. Only a peer holding this many channels
//     busy, or on live streams, is refused.
//   - maxInChannels channels of all peers are held at once: at the bound,
//     the peer holding the most gives up its idle ones, else the open is
//     refused.
//   - maxMarksPerPeer watermarks of one peer's evicted channels are
//     remembered, in memory and in the store; past it, the least recently
//     used are forgotten, markDropBatch at a time, and deleted from the
//     store. maxMarks bounds them over all peers: past it, the peer
//     remembering the most forgets its least recently used.
//
// Forgetting a watermark is safe for exactly-once as long as its sender
// never reopens the channel: a sender reopens a channel only while it has
// envelopes of it unacknowledged (redialling, or from its outbox after a
// restart), and reopening makes it live again, out of the remembered set.
// A duplicate is possible only for a channel whose sender stays away with
// an envelope this node handled but never managed to acknowledge while the
// same peer has more than maxMarksPerPeer other channels evicted since:
// more agent pairs than one peer can hold open at once. A watermark of 0
// (nothing handled) is never remembered: there is nothing to recognise.
const (
	maxInChannelsPerPeer = 1024
	maxInChannels        = 16384
	maxMarksPerPeer      = 1024
	maxMarks             = 65536
	markDropBatch        = 128
)

// peerChans are one peer's inbound channels and the watermarks of its
// evicted ones. The entry of peer.ID("") holds neither: its presence says
// that the watermarks loaded at Start have been sorted by peer
// (peerChansLocked).
type peerChans struct {
	p       peer.ID
	chans   map[string]*inChannel    // by inChans key
	scanned time.Time                // the last eviction scan (see openIn)
	marks   list.List                // keys of r.watermarks of this peer, least recently used first
	markAt  map[string]*list.Element // marks by key
}

// peerChansLocked returns p's entry, made if needed. The first call sorts
// the watermarks loaded at Start into their peers' entries (unreadable
// keys are forgotten) and applies the bounds to them; drop lists what was
// forgotten. r.mu is held.
func (r *Router) peerChansLocked(p peer.ID) (pc *peerChans, drop []string) {
	if r.inByPeer[""] == nil {
		r.inByPeer[""] = &peerChans{}
		for key := range r.watermarks {
			id, _, _ := strings.Cut(key, "/")
			q, err := peer.Decode(id)
			if err != nil || q == "" || r.watermarks[key] == 0 {
				delete(r.watermarks, key)
				drop = append(drop, key)
				continue
			}
			r.peerEntryLocked(q).markLocked(key)
		}
		for q, e := range r.inByPeer {
			if q != "" {
				drop = append(drop, r.trimMarksLocked(e)...)
			}
		}
		drop = append(drop, r.trimMarksLocked(nil)...)
	}
	return r.peerEntryLocked(p), drop
}

func (r *Router) peerEntryLocked(p peer.ID) *peerChans {
	pc := r.inByPeer[p]
	if pc == nil {
		pc = &peerChans{p: p, chans: make(map[string]*inChannel), markAt: make(map[string]*list.Element)}
		r.inByPeer[p] = pc
	}
	return pc
}

// markLocked records key as the most recently used of pc's remembered
// watermarks.
func (pc *peerChans) markLocked(key string) {
	if e := pc.markAt[key]; e != nil {
		pc.marks.MoveToBack(e)
		return
	}
	pc.markAt[key] = pc.marks.PushBack(key)
}

// unmarkLocked takes key out of the remembered watermarks (its channel is
// live again, or the watermark is forgotten).
func (pc *peerChans) unmarkLocked(r *Router, key string) {
	if e := pc.markAt[key]; e != nil {
		pc.marks.Remove(e)
		delete(pc.markAt, key)
	}
	delete(r.watermarks, key)
}

// trimMarksLocked applies maxMarksPerPeer to pc (none: only maxMarks) and
// maxMarks to all, forgetting the least recently used watermarks, and
// returns their keys. A peer left with no channel and no watermark loses
// its entry.
func (r *Router) trimMarksLocked(pc *peerChans) (drop []string) {
	forget := func(pc *peerChans, n int) {
		for range n {
			e := pc.marks.Front()
			if e == nil {
				break
			}
			key := e.Value.(string)
			pc.unmarkLocked(r, key)
			drop = append(drop, key)
		}
		if len(pc.chans) == 0 && pc.marks.Len() == 0 {
			delete(r.inByPeer, pc.p)
		}
	}
	if pc != nil && pc.marks.Len() > maxMarksPerPeer {
		forget(pc, pc.marks.Len()-maxMarksPerPeer+markDropBatch)
	}
	for len(r.watermarks) > maxMarks {
		var big *peerChans
		for q, e := range r.inByPeer {
			if q != "" && (big == nil || e.marks.Len() > big.marks.Len()) {
				big = e
			}
		}
		if big == nil || big.marks.Len() == 0 {
			break // cannot happen: every remembered watermark is some peer's
		}
		forget(big, min(big.marks.Len(), len(r.watermarks)-maxMarks+markDropBatch))
	}
	return drop
}

// busiestPeerLocked returns the entry of the peer holding the most
// channels.
func (r *Router) busiestPeerLocked() *peerChans {
	var big *peerChans
	for q, e := range r.inByPeer {
		if q != "" && (big == nil || len(e.chans) > len(big.chans)) {
			big = e
		}
	}
	return big
}

// evictIdleLocked drops from pc (one peer's) and inChans every channel
// that is idle: nothing queued or running, its watermark persisted, and the
// stream it was last opened or used on ended. Its watermark is remembered
// (unless 0), so a sender that reopens it later on a new stream finds its
// duplicates recognised, as after a restart; the bounds on remembered
// watermarks apply, and the keys of those forgotten are returned. r.mu is
// held.
func (r *Router) evictIdleLocked(pc *peerChans) (drop []string) {
	for key, ic := range pc.chans {
		ic.mu.Lock()
		idle := len(ic.queue) == 0 && !ic.running && !ic.dirty && (ic.out == nil || ic.out.ended.Load())
		if idle {
			ic.evicted.Store(true)
		}
		w := ic.watermark
		ic.mu.Unlock()
		if idle {
			delete(pc.chans, key)
			delete(r.inChans, key)
			if w > 0 { // a watermark of 0 was never persisted: nothing to forget
				r.watermarks[key] = w
				pc.markLocked(key)
			}
		}
	}
	return append(drop, r.trimMarksLocked(pc)...)
}

// forgetMarks deletes forgotten watermarks from the store, when it can
// (WatermarkDeleter), off r.mu. A failure is logged: the rows stay until
// the store ages them out.
func (r *Router) forgetMarks(keys []string) {
	if len(keys) == 0 {
		return
	}
	d, ok := r.o.store.(WatermarkDeleter)
	if !ok {
		return
	}
	if err := d.DeleteWatermarks(keys); err != nil {
		r.log.Warnw("cannot delete forgotten channel watermarks from the store", "count", len(keys), "err", err)
	}
}

func (r *Router) localRecipient(addr string) (agentcard.Card, error) {
	id, host, _ := strings.Cut(addr, "@")
	if host != "" && host != r.selfStr {
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: "agents hosted on node " + shortID(r.self)}
	}
	to, ok := r.reg.GetShared(id) // read-only: the router never modifies cards
	if !ok || to.Origin != agentcard.OriginLocal {
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("the %d agents hosted on node %s", len(r.reg.Local()), shortID(r.self))}
	}
	return to, nil
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
// merges them as remote cards. One forged card taints the whole hello:
// every card is checked (signature, validity, signed by p) before any is
// merged, so a hello with a bad card leaves the registry as it was.
func (r *Router) acceptCards(p peer.ID, cards [][]byte) error {
	opened := make([]agentcard.Card, 0, len(cards))
	for _, b := range cards {
		c, signer, err := r.opener.Open(b) // also validates the card; a card seen before is not verified again
		if err != nil {
			return fmt.Errorf("card presented by %s refused: %w", shortID(p), err)
		}
		if signer != p {
			return &senderError{Sender: c.Address(), Peer: p, Reason: fmt.Sprintf("card signed by %s, presented by another peer", shortID(signer))}
		}
		opened = append(opened, c)
	}
	var merged int
	var tooMany error
	for _, c := range opened {
		changed, err := r.reg.MergeRemote(c)
		if errors.Is(err, agentcard.ErrTooManyCards) {
			// The cards already held stay usable, and the rest of the hello
			// may refresh them: keep the stream and go on, and say so once.
			tooMany = err
			continue
		}
		if err != nil {
			return fmt.Errorf("card %s from %s refused: %w", c.Address(), shortID(p), err)
		}
		if changed {
			merged++
		}
	}
	if tooMany != nil {
		r.security(Event{Code: agentcard.CodeTooManyCards, Detail: tooMany.Error(), Peer: p, SourceTier: -1, TargetTier: -1})
	}
	if len(opened) > 0 && r.o.member != nil {
		// Told even when every card was held already: a peer whose cards
		// came first through the roster's gossip merges none here, and
		// was never tagged a member, so the relay refused it for good.
		r.o.member(p)
	}
	if merged > 0 {
		r.o.sink.Emit(Event{Type: EvtCardsReceived, Time: clock.Now(), Peer: p, Success: true, Detail: fmt.Sprintf("%d new or updated cards", merged), SourceTier: -1, TargetTier: -1})
	}
	return nil
}

// receive checks an envelope that arrived from peer p on channel ic (raw,
// or decoded when the frame's fast path already decoded it). The
// node trusts nothing the sender's node did: attribution, tier and sandbox
// are decided here, from signed cards. A refusal is returned as the error
// (the envelope is nacked in its turn).
func (r *Router) receive(p peer.ID, pStr string, ic *inChannel, raw []byte, decoded *envelope.Envelope) (*envelope.Envelope, error) {
	env := decoded // already decoded and checked by the frame's fast path
	if env == nil {
		var err error
		if env, err = envelope.DecodeCBOR(raw); err != nil {
			return nil, err
		}
	}
	if k := ic.known.Load(); k != nil && env.Sender == k.fromAddr && env.Recipient == k.toAddr && r.reg.Holds(k.lease) {
		// The channel's own pair, attributed before, and no card changed
		// since: the checks below would find the same cards.
		if md := env.Metadata; md != nil && !metadataAgrees(md, k.from) {
			return env, r.senderRefused(p, env, metadataLie(p, env, k.from))
		}
		return env, r.checkReceived(env, k.from, k.to, p)
	}
	lease := r.reg.Lease() // before the lookups: see agentcard.Lease
	from, err := r.attribute(p, pStr, env)
	cards := ic.cards.Load()
	if err == nil && !cards.from.HasAddress(env.Sender) {
		err = &senderError{Sender: env.Sender, Peer: p, Reason: "the envelope's sender is not the agent this channel was opened for"}
	}
	if err != nil {
		return env, r.senderRefused(p, env, err)
	}
	if env.Recipient == envelope.Broadcast {
		return env, &deliveryError{Target: envelope.Broadcast, Reason: "broadcasts are not accepted on direct streams"}
	}
	to, err := r.localRecipient(env.Recipient)
	if err != nil {
		return env, err
	}
	if to.ID != cards.to.ID || to.Host != cards.to.Host {
		return env, &senderError{Sender: env.Sender, Peer: p, Reason: "the envelope's recipient is not the agent this channel was opened for"}
	}
	if !to.HasAddress(env.Recipient) {
		env.Recipient = to.Address() // canonical from here on
	} else {
		ic.known.Store(&route{lease: r.reg.For(lease, &from, &to), from: from, to: to, fromAddr: env.Sender, toAddr: env.Recipient})
	}
	return env, r.checkReceived(env, from, to, p)
}

// checkReceived applies this node's policy to env, received from peer p
// and attributed to from, for local agent to: whether it answers a
// question, then the tier and sandbox rules.
func (r *Router) checkReceived(env *envelope.Envelope, from, to agentcard.Card, p peer.ID) error {
	reply := false
	if isAnswerType(env.Type) && env.CorrelationID != "" {
		r.pmu.Lock()
		_, pr := r.awaitedLocked(env)
		reply = pr != nil
		r.pmu.Unlock()
		reply = reply || r.isAnswer(env)
	}
	return r.checkPolicy(env, from, to, reply, p)
}

// senderRefused reports err, the refusal of env's sender from peer p, as a
// security event and returns it.
func (r *Router) senderRefused(p peer.ID, env *envelope.Envelope, err error) error {
	r.security(Event{EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient, MessageType: env.Type, Code: CodeOf(err), Detail: err.Error(), Peer: p, SourceTier: -1, TargetTier: -1})
	return err
}

// attribute returns the signed card of env's sender, which peer p must host;
// the metadata's tier and sandbox must agree with that card.
func (r *Router) attribute(p peer.ID, pStr string, env *envelope.Envelope) (agentcard.Card, error) {
	c, err := r.attributeAddr(p, pStr, env.Sender)
	if err != nil {
		return c, err
	}
	if md := env.Metadata; md != nil && !metadataAgrees(md, c) {
		return agentcard.Card{}, metadataLie(p, env, c)
	}
	return c, nil
}

// metadataAgrees reports whether an envelope's metadata repeats what its
// sender's card claims (as signed: the sender cannot know what this node
// makes of its claims). Decisions never rest on the metadata: they use the
// card as this node holds it.
func metadataAgrees(md *envelope.Metadata, c agentcard.Card) bool {
	t, sb := c.Claimed()
	return md.Tier == uint8(t) && md.SandboxID == sb
}

// metadataLie is the refusal of an envelope whose metadata disagrees with
// its sender's signed card c.
func metadataLie(p peer.ID, env *envelope.Envelope, c agentcard.Card) error {
	md := env.Metadata
	t, sb := c.Claimed()
	return &senderError{Sender: env.Sender, Peer: p, Reason: fmt.Sprintf("metadata claims tier L%d sandbox %q, the signed card says %s sandbox %q", md.Tier, md.SandboxID, t, sb)}
}

// attributeAddr returns the signed card of agent addr, which peer p must host.
func (r *Router) attributeAddr(p peer.ID, pStr, addr string) (agentcard.Card, error) {
	_, host, qualified := strings.Cut(addr, "@")
	if !qualified {
		return agentcard.Card{}, &senderError{Sender: addr, Peer: p, Reason: "not a full agent address (name@peerID)"}
	}
	if host != pStr {
		return agentcard.Card{}, &senderError{Sender: addr, Peer: p, Reason: "the sender is not hosted by the peer at the other end of the stream"}
	}
	c, ok := r.reg.GetShared(addr)
	if !ok {
		return agentcard.Card{}, &senderError{Sender: addr, Peer: p, Reason: "the peer has presented no signed card for this agent"}
	}
	return c, nil
}

// rosterMark orders the rosters of one peer: its Router's boot and the
// roster's sequence in it.
type rosterMark struct{ boot, seq, feat uint64 }

// retainCards drops the cards of agents p no longer hosts: roster is
// every agent p hosts now, by its own word on its own connection, so it
// can withdraw only its own agents. A roster older than one already
// applied from the same boot of p is ignored: two announcements racing
// (the periodic one, a card change, a new stream's greeting) may reach
// here out of the order p took them in, and the older one would withdraw
// an agent the newer one lists. The check and the withdrawal happen under
// one lock, so two streams of p cannot interleave them.
func (r *Router) retainCards(p peer.ID, roster []string, mark rosterMark) {
	b := r.rosters
	b.mu.Lock()
	if last, ok := b.getLocked(p); ok && mark.boot != 0 && last.boot == mark.boot && mark.seq <= last.seq {
		b.mu.Unlock()
		return
	}
	b.putLocked(p, mark)
	gone := r.reg.RetainPeer(p, roster)
	b.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	r.o.sink.Emit(WithdrawnEvent(p, gone))
}

// WithdrawnEvent is the event that says host withdrew the agents gone
// (their addresses) and their cards left the registry, whichever told it:
// the host's greeting (the router) or its roster message (discovery, which
// node wires).
func WithdrawnEvent(host peer.ID, gone []string) Event {
	return Event{Type: EvtCardsReceived, Time: clock.Now(), Peer: host, Success: true,
		Detail: fmt.Sprintf("%d cards withdrawn by their host: %s", len(gone), strings.Join(gone, ", ")), SourceTier: -1, TargetTier: -1}
}

// helloFrames seals the local cards (cached per revision) into hello frames
// of at most ~half the frame limit each. The last frame carries the roster
// of the local agents (Full), unless it would not fit: then peers keep
// withdrawn cards until their TTL, as before rosters.
func (r *Router) helloFrames() ([][]byte, error) {
	r.rosterMu.Lock()
	local := r.reg.Local()
	r.rosterSeq++
	seq := r.rosterSeq
	r.rosterMu.Unlock()
	roster := make([]string, 0, len(local))
	rosterSize := 0
	for _, c := range local {
		roster = append(roster, c.ID)
		rosterSize += len(c.ID) + 2
	}
	full := len(roster) <= maxHelloCards && rosterSize < r.o.maxFrame/2
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
	if r.o.auth != nil {
		// Before the cards, so that a receiver holds a card at what its
		// grants allow from the first message on.
		recs := r.o.auth.Records()
		for len(recs) > 0 {
			var batch [][]byte
			size := 0
			for len(recs) > 0 && len(batch) < maxHelloRecords && (len(batch) == 0 || size+len(recs[0]) < r.o.maxFrame/2) {
				size += len(recs[0])
				batch, recs = append(batch, recs[0]), recs[1:]
			}
			b, err := encodeMsg(&wireMsg{Kind: kindHello, Auth: batch})
			if err != nil {
				return nil, err
			}
			frames = append(frames, b)
		}
	}
	for len(blobs) > 0 || len(frames) == 0 {
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
	if full {
		b, err := encodeMsg(&wireMsg{Kind: kindHello, Full: true, Roster: roster, Boot: r.rosterBoot, Seq: seq, Feat: featCancel})
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
				r.reached(evt.Peer)
				r.mu.Lock()
				r.greetLocked(evt.Peer)
				var lost []*outChannel
				for _, c := range r.outByID {
					if c.p == evt.Peer && !c.closed.Load() {
						lost = append(lost, c)
					}
				}
				s := r.out[evt.Peer]
				r.mu.Unlock()
				for _, c := range lost {
					c.redialNow()
				}
				if s != nil && evt.Conn != nil {
					r.probeIfMoved(s, evt.Conn)
				}
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
			// Nothing else would greet p again while it stays connected
			// (no identify event, and Announce writes only to open
			// streams), so p would lack our cards until the hello refresh:
			// try again later, with regreetLater's backoff.
			r.log.Debugw("greeting failed", "peer", p, "err", err)
			r.regreetLater(p, 0)
		}
	})
}

// helloLoop re-announces the local cards so peers' registries keep them
// past their TTL, and announces at once when AnnounceSoon asks.
func (r *Router) helloLoop() {
	t := time.NewTicker(r.o.helloInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.Announce()
		case <-r.announceSoon:
			r.Announce()
		}
	}
}

// AnnounceSoon has the router's hello loop announce the local cards (and
// the authority's records) to every peer, without waiting for it: for a
// caller on a stream's reading goroutine, which must not block on writes to
// other peers (two nodes announcing to each other from their readers would
// each wait for the other to read). Requests made while one is pending
// coalesce.
func (r *Router) AnnounceSoon() {
	select {
	case r.announceSoon <- struct{}{}:
	default:
	}
}
