package crdt

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/nova-node/nova-node/crdt/delta"
)

// Pending bounds: a document holds at most maxPending updates (and
// maxPendingBytes) waiting for what they name or for the write rule, at
// most maxPendingPeer (and maxPendingPeerBytes) of them by one author (a
// peer: the share is the author's, not the relaying neighbour's, so a
// peer flooding updates that never become ready evicts its own). Beyond,
// the oldest (of that author, or of the document) is dropped: catch-up
// fetches it again if it is real, and an update naming what does not
// exist never becomes ready and costs at most its share of these bounds.
const (
	maxPending          = 1024
	maxPendingBytes     = 16 << 20
	maxPendingPeer      = 256
	maxPendingPeerBytes = 4 << 20
)

// docLog is the signed history of one document and the state it joins
// to: every applied update (in the order applied, which is causal: an
// update is applied only after its Prev and Deps), the updates waiting for
// what they name, and the joined delta.Doc. It does no I/O and reads no
// clock; its owner (Doc, under its mutex) persists what it applies and
// publishes what it makes.
type docLog struct {
	doc  string
	self string
	d    *delta.Doc

	applied  map[Hash]*Update
	order    []*Update            // applied, in order
	byAuthor map[string][]*Update // applied, sorted by First then hash
	forked   map[string]bool      // replicas seen minting one dot twice
	digests  map[string]digestOf  // cache of replicaDigest

	pending     map[Hash]*pend
	waitingOn   map[Hash][]*pend // held updates by the first update they lack
	arrivals    uint64
	pendingSize int
	perPeer     map[string]*peerShare

	// allow applies the write rule: nil to apply, ErrUnverifiable to hold
	// the update until it can be checked, another error to refuse it.
	allow func(*Update) error
}

type pend struct {
	u       *Update
	from    string
	arrival uint64
	waiting bool // the write rule could not be checked yet
	on      Hash // else: the update it waits for (see waitingOn)
}

type peerShare struct{ n, bytes int }

type digestOf struct {
	last uint64
	sum  Hash
}

func newDocLog(doc, self string) (*docLog, error) {
	d, err := delta.New(self)
	if err != nil {
		return nil, err
	}
	return &docLog{doc: doc, self: self, d: d, applied: map[Hash]*Update{}, byAuthor: map[string][]*Update{},
		forked: map[string]bool{}, digests: map[string]digestOf{}, pending: map[Hash]*pend{}, waitingOn: map[Hash][]*pend{}, perPeer: map[string]*peerShare{}}, nil
}

// addResult is what add did with an update.
type addResult struct {
	applied    []*Update // the update and the pending ones it made ready, in order
	pending    bool      // held: it names updates this node lacks (or waits for a card)
	duplicate  bool
	equivocate []string // replicas newly seen minting one dot twice
	dropped    int      // pending updates dropped to make room
}

// add takes u (decoded and verified by DecodeUpdate) from peer from: a
// duplicate, held until what it names arrives, applied with whatever it
// makes ready, or refused (an error with a code: CodeInvalidUpdate when it
// names an update that does not hold what it claims, or the write rule's
// error).
func (l *docLog) add(u *Update, from string) (addResult, error) {
	var res addResult
	if u.Doc != l.doc {
		return res, updateErr(CodeInvalidUpdate, nil, "update of document %q on %q", u.Doc, l.doc)
	}
	if _, ok := l.applied[u.Hash]; ok {
		res.duplicate = true
		return res, nil
	}
	if _, ok := l.pending[u.Hash]; ok {
		res.duplicate, res.pending = true, true
		return res, nil
	}
	if l.allow != nil {
		if err := l.allow(u); errors.Is(err, ErrUnverifiable) {
			res.pending = true
			res.dropped = l.hold(u, from, true, Hash{})
			return res, nil
		} else if err != nil {
			return res, err
		}
	}
	lack, ok, err := l.missing(u)
	if err != nil {
		return res, err
	}
	if ok {
		l.apply(u, &res)
		return res, nil
	}
	if !l.forked[u.Author] && u.First <= l.digest(u.Author).last {
		// A second update of dots this node holds another update of.
		l.forked[u.Author] = true
		res.equivocate = append(res.equivocate, u.Author)
	}
	res.pending = true
	res.dropped = l.hold(u, from, false, lack)
	return res, nil
}

// missing returns the first of u's Prev and Deps that l lacks (ok false),
// having checked that each it holds is the update u claims (an error when
// one is not).
func (l *docLog) missing(u *Update) (lack Hash, ok bool, err error) {
	if u.First > 1 {
		p, ok := l.applied[u.Prev]
		if !ok {
			return u.Prev, false, nil
		}
		if p.Author != u.Author || p.Last != u.First-1 {
			return Hash{}, false, updateErr(CodeInvalidUpdate, nil, "prev %s is not %.16s's update ending at %d", u.Prev, u.Author, u.First-1)
		}
	}
	for _, d := range u.Deps {
		p, ok := l.applied[d.Hash]
		if !ok {
			return d.Hash, false, nil
		}
		if p.Author != d.Replica || d.Seq < p.First || d.Seq > p.Last {
			return Hash{}, false, updateErr(CodeInvalidUpdate, nil, "dep %s is not %.16s's update holding %d", d.Hash, d.Replica, d.Seq)
		}
	}
	return Hash{}, true, nil
}

// apply joins u, then every held update it makes ready, in turn.
func (l *docLog) apply(u *Update, res *addResult) {
	l.applyOne(u, res)
	queue := []Hash{u.Hash}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		ps := l.waitingOn[h]
		delete(l.waitingOn, h)
		for _, p := range ps {
			if l.pending[p.u.Hash] != p {
				continue
			}
			p.on = Hash{}
			lack, ok, err := l.missing(p.u)
			switch {
			case err != nil:
				l.unhold(p)
			case ok:
				l.unhold(p)
				l.applyOne(p.u, res)
				queue = append(queue, p.u.Hash)
			default:
				p.on = lack
				l.waitingOn[lack] = append(l.waitingOn[lack], p)
			}
		}
	}
}

func (l *docLog) applyOne(u *Update, res *addResult) {
	if u.Delta != nil {
		u.paths = u.Delta.Paths()
		l.d.Join(u.Delta)
	}
	u.Delta = nil // the joined state holds it; Raw is what is kept
	l.applied[u.Hash] = u
	l.order = append(l.order, u)
	list := l.byAuthor[u.Author]
	i := sort.Search(len(list), func(i int) bool {
		return list[i].First > u.First || (list[i].First == u.First && bytes.Compare(list[i].Hash[:], u.Hash[:]) > 0)
	})
	list = slices.Insert(list, i, u)
	l.byAuthor[u.Author] = list
	delete(l.digests, u.Author)
	if !l.forked[u.Author] {
		if i > 0 && list[i-1].Last >= u.First {
			l.forked[u.Author] = true
		}
		if i+1 < len(list) && list[i+1].First <= u.Last {
			l.forked[u.Author] = true
		}
		if l.forked[u.Author] {
			res.equivocate = append(res.equivocate, u.Author)
		}
	}
	res.applied = append(res.applied, u)
}

// hold keeps u pending, waiting for the update hashed on (or, waiting,
// for the write rule to be checkable), dropping the oldest pending updates
// (of from, then of the document) beyond the bounds; it returns how many
// it dropped.
func (l *docLog) hold(u *Update, _ string, waiting bool, on Hash) int {
	from := u.Author
	dropped := 0
	size := len(u.Raw)
	if size > maxPendingPeerBytes {
		return 0
	}
	for l.perPeer[from] != nil && (l.perPeer[from].n+1 > maxPendingPeer || l.perPeer[from].bytes+size > maxPendingPeerBytes) {
		l.dropOldest(from)
		dropped++
	}
	for len(l.pending) > 0 && (len(l.pending)+1 > maxPending || l.pendingSize+size > maxPendingBytes) {
		l.dropOldest("")
		dropped++
	}
	share := l.perPeer[from]
	if share == nil {
		share = &peerShare{}
		l.perPeer[from] = share
	}
	l.arrivals++
	p := &pend{u: u, from: from, arrival: l.arrivals, waiting: waiting}
	l.pending[u.Hash] = p
	if !waiting {
		p.on = on
		l.waitingOn[on] = append(l.waitingOn[on], p)
	}
	l.pendingSize += size
	share.n++
	share.bytes += size
	return dropped
}

func (l *docLog) dropOldest(from string) {
	var oldest *pend
	for _, p := range l.pending {
		if (from == "" || p.from == from) && (oldest == nil || p.arrival < oldest.arrival) {
			oldest = p
		}
	}
	if oldest != nil {
		l.unhold(oldest)
	}
}

func (l *docLog) unhold(p *pend) {
	delete(l.pending, p.u.Hash)
	if ws, ok := l.waitingOn[p.on]; ok {
		ws = slices.DeleteFunc(ws, func(q *pend) bool { return q == p })
		if len(ws) == 0 {
			delete(l.waitingOn, p.on)
		} else {
			l.waitingOn[p.on] = ws
		}
	}
	l.pendingSize -= len(p.u.Raw)
	if s := l.perPeer[p.from]; s != nil {
		s.n--
		s.bytes -= len(p.u.Raw)
		if s.n == 0 {
			delete(l.perPeer, p.from)
		}
	}
}

// recheck retries the held updates that wait for the write rule (a card
// may have arrived): each now allowed waits for what it names, or
// applies; each now refused is dropped.
func (l *docLog) recheck() addResult {
	var res addResult
	var ps []*pend
	for _, p := range l.pending {
		if p.waiting {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b *pend) int { return cmp.Compare(a.arrival, b.arrival) })
	for _, p := range ps {
		if l.pending[p.u.Hash] != p {
			continue
		}
		err := l.allow(p.u)
		if errors.Is(err, ErrUnverifiable) {
			continue
		}
		if err != nil {
			l.unhold(p)
			continue
		}
		p.waiting = false
		lack, ok, err := l.missing(p.u)
		switch {
		case err != nil:
			l.unhold(p)
		case ok:
			l.unhold(p)
			l.apply(p.u, &res)
		default:
			p.on = lack
			l.waitingOn[lack] = append(l.waitingOn[lack], p)
		}
	}
	return res
}

// find returns the applied update of replica r holding seq.
func (l *docLog) find(r string, seq uint64) (*Update, bool) {
	list := l.byAuthor[r]
	i := sort.Search(len(list), func(i int) bool { return list[i].First > seq })
	for j := i - 1; j >= 0; j-- {
		if list[j].Last >= seq {
			return list[j], true
		}
		if !l.forked[r] {
			break
		}
	}
	return nil, false
}

// local signs x, a delta just made by a mutator of l.d, as this replica's
// next update, and applies it.
func (l *docLog) local(key crypto.PrivKey, agent string, x *delta.Delta, now int64) (*Update, error) {
	r, first, last, ok := x.MintedRange()
	if !ok || r != l.self {
		return nil, errors.New("crdt: a local update must mint one range of this replica's dots")
	}
	if last > MaxSeq {
		return nil, fmt.Errorf("crdt: %s: this replica wrote %d updates to %s, the most one replica may", CodeInvalidUpdate, uint64(MaxSeq), l.doc)
	}
	f := UpdateFields{Doc: l.doc, Agent: agent, Time: now}
	if first > 1 {
		p, ok := l.find(l.self, first-1)
		if !ok || p.Last != first-1 {
			return nil, fmt.Errorf("crdt: %s: this replica's update ending at %d is missing", l.doc, first-1)
		}
		f.Prev = p.Hash
	}
	ctx := x.Context()
	for _, rep := range ctx.Replicas() {
		if rep == l.self {
			continue
		}
		seq := ctx.Max(rep)
		p, ok := l.find(rep, seq)
		if !ok {
			return nil, fmt.Errorf("crdt: %s: no update of %s holds dot %d", l.doc, rep, seq)
		}
		f.Deps = append(f.Deps, Dep{Replica: rep, Seq: seq, Hash: p.Hash})
	}
	f.Clock = l.d.Clock()
	f.Clock[l.self] = last
	u, err := SignUpdate(key, f, x)
	if err != nil {
		return nil, err
	}
	var res addResult
	l.apply(u, &res)
	return u, nil
}

// replicaSummary is what a catch-up request says this node holds of one
// replica: the highest dot of its applied updates, the digest of their
// hashes, the hash of the update holding that dot (its head), and whether
// it has seen the replica equivocate.
type replicaSummary struct {
	Replica string
	Last    uint64
	Digest  Hash
	Head    Hash
	Forked  bool
}

func (l *docLog) summary() []replicaSummary {
	out := make([]replicaSummary, 0, len(l.byAuthor))
	for r := range l.byAuthor {
		dg := l.digest(r)
		out = append(out, replicaSummary{Replica: r, Last: dg.last, Digest: dg.sum, Head: l.head(r).Hash, Forked: l.forked[r]})
	}
	slices.SortFunc(out, func(a, b replicaSummary) int { return cmp.Compare(a.Replica, b.Replica) })
	return out
}

// head returns the applied update of r holding r's highest dot (of two,
// the one sorted last).
func (l *docLog) head(r string) *Update {
	var h *Update
	for _, u := range l.byAuthor[r] {
		if h == nil || u.Last >= h.Last {
			h = u
		}
	}
	return h
}

// digest returns r's highest dot and the SHA-256 of the sorted hashes of
// its applied updates (cached until the next of r's updates applies).
func (l *docLog) digest(r string) digestOf {
	if dg, ok := l.digests[r]; ok {
		return dg
	}
	list := l.byAuthor[r]
	hs := make([]Hash, 0, len(list))
	var top uint64
	for _, u := range list {
		hs = append(hs, u.Hash)
		top = max(top, u.Last)
	}
	slices.SortFunc(hs, func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, x := range hs {
		h.Write(x[:])
	}
	dg := digestOf{last: top}
	copy(dg.sum[:], h.Sum(nil))
	l.digests[r] = dg
	return dg
}

// since returns, in applied order, the updates a node whose summary is
// theirs lacks. Per replica r:
//   - it holds none of r's: all of them;
//   - the same updates (equal digests): none;
//   - either side has seen r equivocate: all of r's (so both end with
//     every history of r; the receiver skips what it holds by hash);
//   - this node holds their head: they hold a chain this node holds, so
//     the updates past their highest dot;
//   - else they are ahead, or on another history of r: this node's head
//     of r alone, which they either hold or, holding another update of
//     those dots, see as an equivocation (and ask again for all of r's).
func (l *docLog) since(theirs []replicaSummary) []*Update {
	have := make(map[string]replicaSummary, len(theirs))
	for _, s := range theirs {
		have[s.Replica] = s
	}
	from := make(map[string]uint64, len(l.byAuthor)) // send r's updates ending above from[r]
	only := map[Hash]bool{}
	for r := range l.byAuthor {
		s, ok := have[r]
		switch {
		case !ok:
			from[r] = 0
		case s.Digest == l.digest(r).sum:
		case s.Forked || l.forked[r]:
			from[r] = 0
		case l.applied[s.Head] != nil && l.applied[s.Head].Author == r:
			from[r] = s.Last
		default:
			only[l.head(r).Hash] = true
		}
	}
	if len(from) == 0 && len(only) == 0 {
		return nil
	}
	var out []*Update
	for _, u := range l.order {
		if f, ok := from[u.Author]; (ok && u.Last > f) || only[u.Hash] {
			out = append(out, u)
		}
	}
	return out
}

// has reports whether l holds (applied or pending) the update whose signed
// bytes hash to h: a receiver checks this before paying for verification.
func (l *docLog) has(h Hash) bool {
	_, ok := l.applied[h]
	if !ok {
		_, ok = l.pending[h]
	}
	return ok
}

// pendingCount is how many updates wait.
func (l *docLog) pendingCount() int { return len(l.pending) }

// forkedList returns the replicas seen equivocating, sorted.
func (l *docLog) forkedList() []string {
	var out []string
	for r := range l.forked {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
