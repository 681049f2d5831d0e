package a2ahttp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"go.etcd.io/bbolt"
)

var allStates = []a2a.TaskState{
	a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
	a2a.TaskStateCompleted, a2a.TaskStateCanceled, a2a.TaskStateFailed, a2a.TaskStateRejected,
}

// The whole transition table (8 x 8 states, plus unknown ones).
func TestTransitions(t *testing.T) {
	valid := map[[2]a2a.TaskState]bool{}
	add := func(from a2a.TaskState, tos ...a2a.TaskState) {
		for _, to := range tos {
			valid[[2]a2a.TaskState{from, to}] = true
		}
	}
	add(a2a.TaskStateSubmitted, allStates...)
	add(a2a.TaskStateWorking, allStates[1:]...)
	add(a2a.TaskStateInputRequired, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateCanceled)
	add(a2a.TaskStateAuthRequired, a2a.TaskStateAuthRequired, a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateCanceled)
	for _, s := range allStates[4:] {
		add(s, s) // terminal: only re-saves
	}
	for _, from := range allStates {
		for _, to := range allStates {
			want := valid[[2]a2a.TaskState{from, to}]
			if got := ValidTransition(from, to); got != want {
				t.Errorf("%s -> %s: %v, want %v", from, to, got, want)
			}
		}
		if ValidTransition(from, a2a.TaskStateUnknown) || ValidTransition(a2a.TaskStateUnknown, from) {
			t.Errorf("unknown state accepted with %s", from)
		}
	}
	for _, s := range allStates {
		err := checkTransition("t", "", s)
		if (err == nil) != (s == a2a.TaskStateSubmitted) {
			t.Errorf("new task in %s: %v", s, err)
		}
	}
	var te *TransitionError
	if err := checkTransition("t", a2a.TaskStateCompleted, a2a.TaskStateWorking); !errors.As(err, &te) || !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("error %v", err)
	}
}

func openTestStore(t *testing.T, path string, max int, now func() time.Time) *taskStore {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openStore(db, true, max, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.close() })
	return s
}

func ctxFor(agent string) context.Context {
	return withRoute(context.Background(), &route{agent: agent, version: Version03})
}

func newTask(id string, state a2a.TaskState) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}}
}

// save stores a task, moving it through submitted (and working) to state.
func save(t *testing.T, s *taskStore, ctx context.Context, id string, state a2a.TaskState) {
	t.Helper()
	for _, st := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, state} {
		if st == a2a.TaskStateWorking && state == a2a.TaskStateSubmitted {
			break
		}
		if err := s.Save(ctx, newTask(id, st)); err != nil {
			t.Fatalf("save %s %s: %v", id, st, err)
		}
		if st == state {
			break
		}
	}
}

func TestStoreEnforcesLifecycle(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "s.db"), 10, time.Now)
	ctx := ctxFor("a")
	if err := s.Save(ctx, newTask("t1", a2a.TaskStateWorking)); err == nil {
		t.Fatal("a new task in working was accepted")
	}
	save(t, s, ctx, "t1", a2a.TaskStateCompleted)
	if err := s.Save(ctx, newTask("t1", a2a.TaskStateWorking)); err == nil {
		t.Fatal("completed -> working accepted")
	}
	got, err := s.Get(ctx, "t1")
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("Get = %v %v", got, err)
	}
	// Tasks belong to their agent.
	if _, err := s.Get(ctxFor("b"), "t1"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("other agent's Get: %v", err)
	}
	if _, err := s.Get(ctxFor(""), "t1"); err != nil {
		t.Fatalf("node endpoint Get: %v", err)
	}
	if err := s.Save(ctxFor("b"), newTask("t1", a2a.TaskStateCompleted)); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("other agent's Save: %v", err)
	}
}

// The cap: terminal tasks go, oldest first; active tasks never.
func TestStoreCapPrunesOldestTerminal(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	s := openTestStore(t, filepath.Join(t.TempDir(), "s.db"), 5, now)
	ctx := ctxFor("a")
	save(t, s, ctx, "active-0", a2a.TaskStateWorking)
	save(t, s, ctx, "done-1", a2a.TaskStateCompleted)
	save(t, s, ctx, "active-2", a2a.TaskStateInputRequired)
	save(t, s, ctx, "done-3", a2a.TaskStateFailed)
	save(t, s, ctx, "done-4", a2a.TaskStateCanceled)
	if err := s.pushSave("done-1", pushRecord{Config: a2a.PushConfig{ID: "p", URL: "https://x"}}); err != nil {
		t.Fatal(err)
	}
	save(t, s, ctx, "done-5", a2a.TaskStateCompleted) // over the cap: done-1 goes
	exists := func(id string) bool { _, err := s.record(a2a.TaskID(id)); return err == nil }
	if exists("done-1") || !exists("active-0") || !exists("done-3") || s.count() != 5 {
		t.Fatalf("after one prune: done-1 %v active-0 %v count %d", exists("done-1"), exists("active-0"), s.count())
	}
	if ps, _ := s.pushList("done-1"); len(ps) != 0 {
		t.Fatal("push configs of a pruned task survived")
	}
	save(t, s, ctx, "done-6", a2a.TaskStateCompleted)
	save(t, s, ctx, "done-7", a2a.TaskStateCompleted)
	for _, id := range []string{"done-3", "done-4"} {
		if exists(id) {
			t.Fatalf("%s survived", id)
		}
	}
	// Only active tasks left: the store grows past the cap rather than drop them.
	for i := range 6 {
		save(t, s, ctx, fmt.Sprintf("busy-%d", i), a2a.TaskStateWorking)
	}
	if !exists("active-0") || !exists("active-2") || !exists("busy-5") {
		t.Fatal("an active task was pruned")
	}
	if s.count() != 8 {
		t.Fatalf("count %d, want 8 (all active)", s.count())
	}
}

func TestStorePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, _ := bbolt.Open(path, 0o600, nil)
	s, _ := openStore(db, true, 10, time.Now)
	save(t, s, ctxFor("a"), "t1", a2a.TaskStateCompleted)
	if err := s.pushSave("t1", pushRecord{Version: Version10, Config: a2a.PushConfig{ID: "p1", URL: "https://h"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTestStore(t, path, 10, time.Now)
	got, err := s2.Get(ctxFor("a"), "t1")
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after reopen: %v %v", got, err)
	}
	p, err := s2.pushGet("t1", "p1")
	if err != nil || p.Version != Version10 || p.Config.URL != "https://h" {
		t.Fatalf("push after reopen: %+v %v", p, err)
	}
}

// A task left working without an execution (as after a restart) fails with
// "Task timed out" once the timeout passes; a task with a live execution is
// left to its own timeout. Time is synctest's fake clock.
func TestSweeperTimesOutOrphans(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DBPath = filepath.Join(dir, "g.db")
		cfg.TaskTimeout = 5 * time.Minute
		g, err := New(nopMesh{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor("a")
		save(t, g.store, ctx, "orphan", a2a.TaskStateWorking)
		save(t, g.store, ctx, "running", a2a.TaskStateWorking)
		save(t, g.store, ctx, "waiting", a2a.TaskStateInputRequired)
		if !g.enter("running") {
			t.Fatal("enter")
		}
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if st := state(t, g, "orphan"); st != a2a.TaskStateWorking {
			t.Fatalf("orphan failed early: %s", st)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		rec, _ := g.store.record("orphan")
		task, _ := rec.task()
		if task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil ||
			task.Status.Message.Parts[0].(a2a.TextPart).Text != "Task timed out" {
			t.Fatalf("orphan: %+v", task.Status)
		}
		if st := state(t, g, "running"); st != a2a.TaskStateWorking {
			t.Fatalf("live task swept: %s", st)
		}
		if st := state(t, g, "waiting"); st != a2a.TaskStateInputRequired {
			t.Fatalf("input-required task swept: %s", st)
		}
		g.leave("running")
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func state(t *testing.T, g *Gateway, id string) a2a.TaskState {
	t.Helper()
	rec, err := g.store.record(a2a.TaskID(id))
	if err != nil {
		t.Fatal(err)
	}
	return rec.State
}

// A blocking send's saves stay in memory until its turn ends, then are one
// transaction; readers see them all along. Other saves are written at once.
func TestStoreKeepsABlockingTurnInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s := openTestStore(t, path, 10, time.Now)
	blocking := withRoute(context.Background(), &route{agent: "a", version: Version03, blocking: true})
	for _, st := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateWorking} {
		if err := s.Save(blocking, newTask("b1", st)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.durable("b1"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("working turn in bbolt: %v", err)
	}
	if got, err := s.Get(ctxFor("a"), "b1"); err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if _, err := s.Get(ctxFor("other"), "b1"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("another agent's Get = %v", err)
	}
	if recs, _ := s.list("a"); len(recs) != 1 || s.count() != 1 {
		t.Fatalf("list %d, count %d", len(recs), s.count())
	}
	// A transition the lifecycle refuses is refused in memory too.
	if err := s.Save(blocking, newTask("b1", a2a.TaskStateSubmitted)); err == nil {
		t.Fatal("working -> submitted accepted")
	}
	if err := s.Save(blocking, newTask("b1", a2a.TaskStateCompleted)); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.durable("b1"); err != nil || rec.State != a2a.TaskStateCompleted || rec.Agent != "a" {
		t.Fatalf("after the turn: %+v, %v", rec, err)
	}
	if len(s.pending) != 0 {
		t.Fatalf("pending %v", s.pending)
	}
	// A non-blocking save is written at once.
	save(t, s, ctxFor("a"), "n1", a2a.TaskStateSubmitted)
	if _, err := s.durable("n1"); err != nil {
		t.Fatalf("non-blocking submitted not written: %v", err)
	}
	// A task with a push config is written at once: its webhook hears
	// every state.
	if err := s.pushSave("p1", pushRecord{Config: a2a.PushConfig{ID: "c", URL: "https://example.com/h"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(blocking, newTask("p1", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.durable("p1"); err != nil {
		t.Fatalf("a task with a push config kept in memory: %v", err)
	}
	// A pending save nobody finishes is dropped once old and not live.
	if err := s.Save(blocking, newTask("b2", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	s.dropPending(time.Now().Add(time.Hour), func(id a2a.TaskID) bool { return id == "b2" })
	if _, err := s.record("b2"); err != nil {
		t.Fatal("a live task's pending save was dropped")
	}
	s.dropPending(time.Now().Add(-time.Hour), func(a2a.TaskID) bool { return false })
	if _, err := s.record("b2"); err != nil {
		t.Fatal("a recent pending save was dropped")
	}
	s.dropPending(time.Now().Add(time.Hour), func(a2a.TaskID) bool { return false })
	if _, err := s.record("b2"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("stale pending save kept: %v", err)
	}
}
