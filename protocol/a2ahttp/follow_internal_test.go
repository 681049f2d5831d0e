package a2ahttp

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// A streamed task is abandoned only after a full grace period with no
// stream following it: a resubscription within the grace period keeps it,
// and the end of the last stream starts the period again.
func TestStreamGraceAllowsResubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		g := &Gateway{cfg: Config{StreamGrace: grace}, follow: map[a2a.TaskID]*followers{}}
		var abandoned atomic.Int32
		client, leave := context.WithCancel(t.Context())
		stop := g.followStream("t1", client, func() { abandoned.Add(1) })
		defer stop()

		leave() // the first stream ends
		synctest.Wait()
		time.Sleep(grace / 2)
		release := g.followTask("t1") // a client resubscribes in time
		time.Sleep(2 * grace)
		synctest.Wait()
		if n := abandoned.Load(); n != 0 {
			t.Fatalf("abandoned %d times while a resubscriber follows the task", n)
		}

		release() // the resubscriber goes too
		time.Sleep(grace - time.Millisecond)
		synctest.Wait()
		if n := abandoned.Load(); n != 0 {
			t.Fatalf("abandoned %d times before the grace period ended", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := abandoned.Load(); n != 1 {
			t.Fatalf("abandoned %d times after the grace period, want 1", n)
		}
	})
}

// An execution that has ended is never abandoned, and resubscriptions to a
// task not started by a stream are not tracked.
func TestStreamGraceAfterTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = time.Second
		g := &Gateway{cfg: Config{StreamGrace: grace}, follow: map[a2a.TaskID]*followers{}}
		var abandoned atomic.Int32
		client, leave := context.WithCancel(t.Context())
		stop := g.followStream("t1", client, func() { abandoned.Add(1) })
		leave()
		synctest.Wait()
		stop() // the execution ends within the grace period
		g.followTask("t2")()
		time.Sleep(2 * grace)
		synctest.Wait()
		if n := abandoned.Load(); n != 0 {
			t.Fatalf("abandoned %d times after the execution ended", n)
		}
		if len(g.follow) != 0 {
			t.Fatalf("followers left: %v", g.follow)
		}
	})
}

// A streamed task with a push config is not abandoned: its outcome reaches
// the webhook.
func TestStreamGraceKeepsTasksWithPushConfigs(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "a2a.db"), 10, time.Now)
	cfg := Config{StreamGrace: time.Hour}
	g := &Gateway{cfg: cfg, store: s, pusher: newPusher(s, nil, &cfg), follow: map[a2a.TaskID]*followers{}}
	var abandoned atomic.Int32
	for _, id := range []a2a.TaskID{"pushed", "plain"} {
		client, leave := context.WithCancel(t.Context())
		stop := g.followStream(id, client, func() { abandoned.Add(1) })
		defer stop()
		leave()
	}
	if err := s.pushSave("pushed", pushRecord{Version: Version03, Config: a2a.PushConfig{ID: "p", URL: "https://h"}}); err != nil {
		t.Fatal(err)
	}
	waitUnfollowed := func(id a2a.TaskID) {
		t.Helper()
		waitfor.Eventually(t, 5*time.Second, func() error {
			g.mu.Lock()
			defer g.mu.Unlock()
			if f := g.follow[id]; f.n != 0 {
				return fmt.Errorf("task %s: %d followers", id, f.n)
			}
			return nil
		})
	}
	waitUnfollowed("pushed")
	g.abandonIfUnfollowed("pushed", g.follow["pushed"])
	if n := abandoned.Load(); n != 0 {
		t.Fatalf("a task with a push config was abandoned")
	}
	waitUnfollowed("plain")
	g.abandonIfUnfollowed("plain", g.follow["plain"])
	if n := abandoned.Load(); n != 1 {
		t.Fatalf("a task without followers or push configs: abandoned %d times, want 1", n)
	}
}
