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
// maxPendingBytes) waiting for what they name, at most maxPendingPeer
// (and maxPendingPeerBytes) of them from one peer. Beyond, the oldest
// (of that peer, or of the document) is dropped: catch-up fetches it
// again if it is real, and an update naming what does not exist never
// becomes ready and costs at most its share of these bounds.
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
		forked: map[string]bool{}, digests: map[string]digestOf{}, pending: map[Hash]*pend{}, perPeer: map[string]*peerShare{}}, nil
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
	waiting := false
	if l.allow != nil {
		if err := l.allow(u); errors.Is(err, ErrUnverifiable) {
			waiting = true
		} else if err != nil {
			return res, err
		}
	}
	if !waiting {
		ready, err := l.ready(u)
		if err != nil {
			return res, err
		}
		if ready {
			l.apply(u, &res)
			l.drain(&res)
			return res, nil
		}
	}
	res.pending = true
	res.dropped = l.hold(u, from, waiting)
	return res, nil
}

// ready reports whether l holds u's Prev and every Dep, each the update
// it claims to be (an error when one is not).
func (l *docLog) ready(u *Update) (bool, error) {
	if u.First > 1 {
		p, ok := l.applied[u.Prev]
		if !ok {
			return false, nil
		}
		if p.Author != u.Author || p.Last != u.First-1 {
			return false, updateErr(CodeInvalidUpdate, nil, "prev %s is not %.16s's update ending at %d", u.Prev, u.Author, u.First-1)
		}
	}
	for _, d := range u.Deps {
		p, ok := l.applied[d.Hash]
		if !ok {
			return false, nil
		}
		if p.Author != d.Replica || d.Seq < p.First || d.Seq > p.Last {
			return false, updateErr(CodeInvalidUpdate, nil, "dep %s is not %.16s's update holding %d", d.Hash, d.Replica, d.Seq)
		}
	}
	return true, nil
}

func (l *docLog) apply(u *Update, res *addResult) {
	l.d.Join(u.Delta)
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
		for j := i - 1; j >= 0; j-- {
			if o := list[j]; o.Last >= u.First {
				l.forked[u.Author] = true
				break
			}
			if !l.forked[u.Author] {
				break
			}
		}
		if j := i + 1; j < len(list) && list[j].First <= u.Last {
			l.forked[u.Author] = true
		}
		if l.forked[u.Author] {
			res.equivocate = append(res.equivocate, u.Author)
		}
	}
	res.applied = append(res.applied, u)
}

// hold keeps u pending, dropping the oldest pending updates (of from, then
// of the document) beyond the bounds; it returns how many it dropped.
func (l *docLog) hold(u *Update, from string, waiting bool) int {
	dropped := 0
	size := len(u.Raw)
	share := l.perPeer[from]
	if share == nil {
		share = &peerShare{}
		l.perPeer[from] = share
	}
	for share.n > 0 && (share.n+1 > maxPendingPeer || share.bytes+size > maxPendingPeerBytes) {
		l.dropOldest(from)
		dropped++
	}
	for len(l.pending) > 0 && (len(l.pending)+1 > maxPending || l.pendingSize+size > maxPendingBytes) {
		l.dropOldest("")
		dropped++
	}
	if size > maxPendingPeerBytes {
		return dropped
	}
	l.arrivals++
	l.pending[u.Hash] = &pend{u: u, from: from, arrival: l.arrivals, waiting: waiting}
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
	l.pendingSize -= len(p.u.Raw)
	if s := l.perPeer[p.from]; s != nil {
		s.n--
		s.bytes -= len(p.u.Raw)
		if s.n == 0 {
			delete(l.perPeer, p.from)
		}
	}
}

// drain applies pending updates that have become ready, and drops those
// found invalid or refused.
func (l *docLog) drain(res *addResult) {
	for progress := true; progress; {
		progress = false
		ps := make([]*pend, 0, len(l.pending))
		for _, p := range l.pending {
			ps = append(ps, p)
		}
		slices.SortFunc(ps, func(a, b *pend) int { return cmp.Compare(a.arrival, b.arrival) })
		for _, p := range ps {
			if p.waiting {
				if err := l.allow(p.u); errors.Is(err, ErrUnverifiable) {
					continue
				} else if err != nil {
					l.unhold(p)
					continue
				}
				p.waiting = false
			}
			ready, err := l.ready(p.u)
			if err != nil {
				l.unhold(p)
				continue
			}
			if ready {
				l.unhold(p)
				l.apply(p.u, res)
				progress = true
			}
		}
	}
}

// recheck retries the pending updates (a card may have arrived).
func (l *docLog) recheck() addResult {
	var res addResult
	l.drain(&res)
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
	l.drain(&res)
	return u, nil
}

// summary is what a catch-up request says this node holds: per replica,
// the highest dot of its applied updates and the digest of their hashes.
type replicaSummary struct {
	Replica string
	Last    uint64
	Digest  Hash
}

func (l *docLog) summary() []replicaSummary {
	out := make([]replicaSummary, 0, len(l.byAuthor))
	for r := range l.byAuthor {
		dg := l.digest(r)
		out = append(out, replicaSummary{Replica: r, Last: dg.last, Digest: dg.sum})
	}
	slices.SortFunc(out, func(a, b replicaSummary) int { return cmp.Compare(a.Replica, b.Replica) })
	return out
}

// digest returns r's highest dot and the SHA-256 of the sorted hashes of
// its applied updates (cached until the next of r's updates applies).
func (l *docLog) digest(r string) digestOf {
	if dg, ok := l.digests[r]; ok {
		return dg
	}
	dg := digestUpTo(l.byAuthor[r], MaxSeq+1)
	l.digests[r] = dg
	return dg
}

// digestUpTo digests the updates of list ending at or below last.
func digestUpTo(list []*Update, last uint64) digestOf {
	hs := make([]Hash, 0, len(list))
	var top uint64
	for _, u := range list {
		if u.Last <= last {
			hs = append(hs, u.Hash)
			top = max(top, u.Last)
		}
	}
	slices.SortFunc(hs, func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, x := range hs {
		h.Write(x[:])
	}
	var dg digestOf
	dg.last = top
	copy(dg.sum[:], h.Sum(nil))
	return dg
}

// since returns, in applied order, the updates a node whose summary is
// theirs lacks: per replica, those past its highest dot when it holds the
// same updates up to there, else all of that replica's (it holds a
// different history: one of them equivocated, and both must end with
// every update).
func (l *docLog) since(theirs []replicaSummary) []*Update {
	have := make(map[string]replicaSummary, len(theirs))
	for _, s := range theirs {
		have[s.Replica] = s
	}
	from := make(map[string]uint64, len(l.byAuthor)) // send r's updates ending above from[r]
	for r := range l.byAuthor {
		s, ok := have[r]
		switch {
		case !ok:
			from[r] = 0
		case s.Digest == l.digest(r).sum:
			continue
		case digestUpTo(l.byAuthor[r], s.Last) == digestOf{last: s.Last, sum: s.Digest}:
			from[r] = s.Last
		default:
			from[r] = 0
		}
	}
	var out []*Update
	if len(from) == 0 {
		return nil
	}
	for _, u := range l.order {
		if f, ok := from[u.Author]; ok && u.Last > f {
			out = append(out, u)
		}
	}
	return out
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
