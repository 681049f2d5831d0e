package protocol

import "time"

// Work that runs for each burst of envelopes (a channel's worker, a local
// handler call) goes to warm goroutines rather than new ones: a new
// goroutine starts with a small stack and regrows it through the handler,
// reply and send path every time (runtime.newstack was ~5% of a round
// trip's CPU). Idle workers park on r.jobs; one that has had no job for
// workerIdle to twice that exits, so an idle node keeps none.
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

// A worker exits when a whole workerIdle period passed without a job. Its
// timer is not reset per job (a timer reset per message was a measurable
// share of it): jobs are counted, and when the timer fires the worker goes
// on for another period if any ran since the last.
func (r *Router) workerLoop() {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	jobs, seen := 0, 0
	for {
		select {
		case f := <-r.jobs:
			f()
			jobs++
		case <-t.C:
			if jobs == seen {
				return
			}
			seen = jobs
			t.Reset(workerIdle)
		case <-r.ctx.Done():
			return
		}
	}
}
