package crdt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nova-node/nova-node/crdt"
)

// TestKindRefused: a set operation on a path that holds no set, and an incr
// on one that holds no integer, are refused with a *crdt.KindError that
// says what the path holds; set replaces any kind, and a deleted path takes
// any kind again.
func TestKindRefused(t *testing.T) {
	r := newReplica(t, nil, nil)
	d := open(t, r, "kinds")
	ctx := t.Context()
	agent := "alice@" + r.h.ID().String()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.Set(ctx, agent, "/goal", json.RawMessage(`"ship"`)))
	must(d.SetAdd(ctx, agent, "/tags", json.RawMessage(`"a"`)))
	must(d.Incr(ctx, agent, "/n", 2))
	for _, c := range []struct {
		name string
		do   func() error
		want string
	}{
		{"add to a string", func() error { return d.SetAdd(ctx, agent, "/goal", json.RawMessage(`"x"`)) },
			"/goal holds a string, not a set: add would replace it; delete it first, or write it with set"},
		{"remove from a string", func() error { return d.SetRemove(ctx, agent, "/goal", json.RawMessage(`"x"`)) },
			"/goal holds a string, not a set: remove takes an element out of a set; to clear the path, delete it"},
		{"incr a set", func() error { return d.Incr(ctx, agent, "/tags", 1) },
			"/tags holds a set (array), not a counter: incr would replace it; delete it first, or write it with set"},
		{"add to a counter", func() error { return d.SetAdd(ctx, agent, "/n", json.RawMessage(`1`)) },
			"/n holds a number, not a set: add would replace it; delete it first, or write it with set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			var ke *crdt.KindError
			if !errors.As(err, &ke) || err.Error() != c.want {
				t.Fatalf("got %v, want a *crdt.KindError %q", err, c.want)
			}
		})
	}
	must(d.Incr(ctx, agent, "/n", 1))
	must(d.SetAdd(ctx, agent, "/tags", json.RawMessage(`"b"`)))
	must(d.Set(ctx, agent, "/tags", json.RawMessage(`7`)))
	must(d.Delete(ctx, agent, "/goal"))
	must(d.SetAdd(ctx, agent, "/goal", json.RawMessage(`"x"`)))
}

// TestKindRaceOneWins: two writers of different kinds (a set and a
// counter) on the same empty path, at once: exactly one succeeds and the
// other gets a *crdt.KindError, because the rule is checked under the
// document's lock with the write. Run it with -race.
func TestKindRaceOneWins(t *testing.T) {
	r := newReplica(t, nil, nil)
	d := open(t, r, "race")
	agent := "alice@" + r.h.ID().String()
	ctx := context.Background()
	for i := range 50 {
		path := fmt.Sprintf("/p%d", i)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() {
			<-start
			errs[0] = d.SetAdd(ctx, agent, path, json.RawMessage(`"x"`))
		})
		wg.Go(func() {
			<-start
			errs[1] = d.Incr(ctx, agent, path, 1)
		})
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			var ke *crdt.KindError
			switch {
			case err == nil:
				ok++
			case !errors.As(err, &ke):
				t.Fatalf("%s: %v, want nil or a *crdt.KindError", path, err)
			}
		}
		if ok != 1 {
			t.Fatalf("%s: %d writers of different kinds succeeded (%v), want exactly 1", path, ok, errs)
		}
	}
}
