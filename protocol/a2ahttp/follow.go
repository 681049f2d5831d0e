package a2ahttp

import (
	"context"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Followers of streamed tasks.
//
// A task started by a streaming send (message/stream,
// SendStreamingMessage) runs while a stream follows it: its own stream, or
// a resubscription (tasks/resubscribe, SubscribeToTask), which the spec
// offers to a client whose connection dropped. Once no stream has followed
// it for Config.StreamGrace, and no push config is set for it, the gateway
// cancels it: the mesh call ends, its call slot is freed, and the task ends
// canceled with the status message "Task canceled: no client follows it".
// A client that comes back within the grace period finds it still running.
//
// A non-streaming send whose client disconnects keeps its task running to
// the end (or TaskTimeout): a non-blocking send is meant to outlive its
// request (its client polls tasks/get or gets pushes), and the result of a
// blocking send stays readable with tasks/get, which a client that lost
// the response uses; neither leaves a sign that nobody will ask.

// errAbandoned is the cause of an execution ended because no stream
// followed its task.
var errAbandoned = errors.New("a2ahttp: no client follows the task")

// followers are the streams following one streamed task's execution.
type followers struct {
	n       int         // streams following the task
	abandon func()      // ends the execution
	timer   *time.Timer // running while n is 0
}

// followStream registers the execution of task id, started by a stream
// whose request context is client: when no stream follows the task for the
// grace period, abandon is called. The returned func unregisters it; the
// executor calls it when the execution ends.
func (g *Gateway) followStream(id a2a.TaskID, client context.Context, abandon func()) (stop func()) {
	f := &followers{n: 1, abandon: abandon}
	g.mu.Lock()
	g.follow[id] = f
	g.mu.Unlock()
	unhook := context.AfterFunc(client, func() { g.unfollow(id, f) })
	return func() {
		unhook()
		g.mu.Lock()
		defer g.mu.Unlock()
		if f.timer != nil {
			f.timer.Stop()
		}
		if g.follow[id] == f {
			delete(g.follow, id)
		}
	}
}

// followTask counts one more stream following task id while it runs (a
// resubscription); the returned func ends it. Tasks not started by a
// stream are not tracked.
func (g *Gateway) followTask(id a2a.TaskID) (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.follow[id]
	if f == nil {
		return func() {}
	}
	f.n++
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	return func() { g.unfollow(id, f) }
}

// unfollow ends one stream following the task; the last one starts the
// grace period.
func (g *Gateway) unfollow(id a2a.TaskID, f *followers) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.n--; f.n > 0 || g.follow[id] != f {
		return
	}
	f.timer = time.AfterFunc(g.cfg.StreamGrace, func() { g.abandonIfUnfollowed(id, f) })
}

// abandonIfUnfollowed ends the execution if, at the end of its grace
// period, still no stream follows the task and no push config waits for
// its outcome.
func (g *Gateway) abandonIfUnfollowed(id a2a.TaskID, f *followers) {
	unfollowed := func() bool { return g.follow[id] == f && f.n == 0 }
	g.mu.Lock()
	ok := unfollowed()
	g.mu.Unlock()
	if !ok {
		return
	}
	if g.pusher != nil {
		recs, err := g.store.pushList(id)
		if err != nil || len(recs) > 0 {
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if unfollowed() {
		f.abandon()
	}
}
