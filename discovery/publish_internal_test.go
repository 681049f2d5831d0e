package discovery

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ipfs/go-cid"
)

// fakeProvider is a DHT whose closest-peers lookup takes lookup: a Provide
// whose context ends first returns context.DeadlineExceeded, as kad-dht's
// does after handing the record to the closest peers found so far.
type fakeProvider struct {
	lookup time.Duration
	calls  []time.Duration // each call's deadline from its start; 0: none
	err    error           // returned by a Provide that completes
}

func (f *fakeProvider) Provide(ctx context.Context, _ cid.Cid, broadcast bool) error {
	if !broadcast {
		return errors.New("not broadcast")
	}
	var d time.Duration
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	f.calls = append(f.calls, d)
	t := time.NewTimer(f.lookup)
	defer t.Stop()
	select {
	case <-t.C:
		return f.err
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return context.DeadlineExceeded
		}
		return ctx.Err()
	}
}

// TestProvideKeyFirstBounded: the first provide of a key whose lookup
// is slow gives the record to the peers found within firstProvideWait,
// then runs the full provide; a fast first provide runs once; a later
// provide runs in full at once; a cancelled publish stops after the
// bounded provide; other errors are returned as they are.
func TestProvideKeyFirstBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeProvider{lookup: 12 * time.Second}
		start := time.Now()
		if err := provideKey(t.Context(), slow, "nova/s/agent/a", true); err != nil {
			t.Fatalf("slow first provide: %v", err)
		}
		if len(slow.calls) != 2 || slow.calls[0] != firstProvideWait || slow.calls[1] != 0 {
			t.Fatalf("slow first provide: calls with deadlines %v, want [%v 0]", slow.calls, firstProvideWait)
		}
		if took := time.Since(start); took != firstProvideWait+slow.lookup {
			t.Fatalf("slow first provide took %v, want %v", took, firstProvideWait+slow.lookup)
		}

		fast := &fakeProvider{lookup: 300 * time.Millisecond}
		if err := provideKey(t.Context(), fast, "nova/s/agent/a", true); err != nil || len(fast.calls) != 1 {
			t.Fatalf("fast first provide: %v, %d calls, want one", err, len(fast.calls))
		}

		later := &fakeProvider{lookup: 12 * time.Second}
		if err := provideKey(t.Context(), later, "nova/s/agent/a", false); err != nil || len(later.calls) != 1 || later.calls[0] != 0 {
			t.Fatalf("later provide: %v, calls with deadlines %v, want one without", err, later.calls)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		cut := &fakeProvider{lookup: 12 * time.Second}
		if err := provideKey(ctx, cut, "nova/s/agent/a", true); !errors.Is(err, context.DeadlineExceeded) || len(cut.calls) != 1 {
			t.Fatalf("publish cancelled: %v, %d calls, want DeadlineExceeded after one", err, len(cut.calls))
		}

		failing := &fakeProvider{lookup: time.Millisecond, err: errors.New("failed to find any peer in table")}
		if err := provideKey(t.Context(), failing, "nova/s/agent/a", true); err == nil || err.Error() != failing.err.Error() || len(failing.calls) != 1 {
			t.Fatalf("failing provide: %v, %d calls", err, len(failing.calls))
		}
	})
}

// TestRecordsPutAgainOnlyWhenTheSwarmGrewUnderThem: the publish after the
// routing table doubles is for records put while the swarm was smaller
// than k, and only once the table stopped growing; a node whose publish
// ended with k peers or more in its table (one that joined a settled
// swarm) does not put its records a second time when its table fills.
func TestRecordsPutAgainOnlyWhenTheSwarmGrewUnderThem(t *testing.T) {
	for _, c := range []struct {
		name          string
		n, prev, last int
		want          bool
	}{
		{"small swarm doubled, table settled", 8, 8, 3, true},
		{"small swarm doubled exactly", 6, 6, 3, true},
		{"first publish saw no peer", 1, 1, 0, true},
		{"small swarm doubled, still growing", 8, 7, 3, false},
		{"small swarm grew less than double", 5, 5, 3, false},
		{"no growth", 3, 3, 3, false},
		{"shrank", 2, 2, 3, false},
		{"just below k, doubled", 40, 40, 19, true},
		{"k at the last publish", 40, 40, 20, false},
		{"joined a settled swarm, table filled", 90, 90, 25, false},
		{"empty table", 0, 0, 0, false},
	} {
		if got := grewUnderRecords(c.n, c.prev, c.last); got != c.want {
			t.Errorf("%s: grewUnderRecords(%d, %d, %d) = %v, want %v", c.name, c.n, c.prev, c.last, got, c.want)
		}
	}
}
