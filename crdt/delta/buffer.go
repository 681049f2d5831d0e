package delta

// Buffer keeps deltas numbered 1, 2, 3… so that a peer that has
// acknowledged number n can be sent everything after n as one delta group
// (the delta-interval anti-entropy of the paper). It is the cheap path of
// catch-up; [Doc.DeltaSince] is the path that always works.
//
// Prune drops deltas every peer has acknowledged, which bounds the buffer
// by what peers still lack. The zero value is an empty buffer. A Buffer is
// not safe for concurrent use.
type Buffer struct {
	first  uint64 // number of deltas[0]; last+1 when empty
	last   uint64 // number of the last delta added, 0 before any
	deltas []*Delta
}

func (b *Buffer) init() {
	if b.first == 0 {
		b.first = 1
	}
}

// Add appends a copy of x and returns its number.
func (b *Buffer) Add(x *Delta) uint64 {
	b.init()
	b.deltas = append(b.deltas, x.Clone())
	b.last++
	return b.last
}

// Since returns the join of every delta numbered above seq, for a peer
// that has acknowledged seq. It returns (nil, true) when there is nothing
// after seq, and (nil, false) when deltas the peer lacks were pruned: send
// [Doc.DeltaSince] instead.
func (b *Buffer) Since(seq uint64) (*Delta, bool) {
	b.init()
	if seq >= b.last {
		return nil, true
	}
	if seq+1 < b.first {
		return nil, false
	}
	rest := b.deltas[seq+1-b.first:]
	g := rest[0].Clone()
	for _, x := range rest[1:] {
		g.Join(x)
	}
	return g, true
}

// Prune drops the deltas numbered up to acked: call it with the lowest
// number every known peer has acknowledged.
func (b *Buffer) Prune(acked uint64) {
	b.init()
	if acked < b.first {
		return
	}
	k := min(acked-b.first+1, uint64(len(b.deltas)))
	clear(b.deltas[:k])
	b.deltas = b.deltas[k:]
	b.first += k
}

// Seq returns the number of the last delta added, 0 before any.
func (b *Buffer) Seq() uint64 { return b.last }

// Len returns how many deltas b holds.
func (b *Buffer) Len() int { return len(b.deltas) }
