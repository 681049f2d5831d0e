package protocol

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// Work that runs for each burst of envelopes (a channel's worker, a local
// handler call) goes to warm goroutines rather than new ones: a new
// goroutine starts with a small stack and regrows it through the handler,
// reply and send path every time (runtime.newstack was ~5% of a round
// trip's CPU). Idle workers park on r.jobs; one that has waited
// workerIdle exits, so an idle node keeps none.
const workerIdle = 5 * time.Second

// goWork runs f on an idle worker, or on a new one, unless the Router is
// closing. Workers are Router goroutines: Close waits for them.
func (r *Router) goWork(f func()) bool {
	select {
	case r.jobs <- f:
		return true
	default:
	}
	return r.spawn(func() {
		f()
		r.workerLoop()
	})
}

func (r *Router) workerLoop() {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case f := <-r.jobs:
			f()
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// deadline keeps a stream's write deadline about writeTimeout ahead,
// re-arming it only once half of it has passed: on a yamux stream each
// SetWriteDeadline arms a new timer, too dear for every flush.
type deadline struct{ until time.Time }

const writeTimeout = 30 * time.Second

func (d *deadline) extend(st network.Stream) {
	now := time.Now()
	if now.Add(writeTimeout / 2).Before(d.until) {
		return
	}
	d.until = now.Add(writeTimeout)
	_ = st.SetWriteDeadline(d.until)
}
