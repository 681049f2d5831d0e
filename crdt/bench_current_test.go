package crdt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// BenchmarkLateJoinerCurrent: node a holds a small document (20 updates of
// one key each); node b connects and opens it. Reported: µs from b's Open
// until b holds all of it (what `crdt get` on b waits for), and the
// bytes of the signed updates transferred. Each iteration is a new node b;
// anti-entropy is off, so only the catch-up that Open sends counts.
func BenchmarkLateJoinerCurrent(b *testing.B) {
	a := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
	da := open(b, a, "notes")
	ctx := context.Background()
	for k := range 20 {
		if err := da.Set(ctx, "w@"+a.h.ID().String(), fmt.Sprintf("/k%d", k), json.RawMessage(fmt.Sprint(k))); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	n := 0
	for b.Loop() {
		r := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
		connect(b, r, a)
		start := time.Now()
		db := open(b, r, "notes")
		if v, ok := db.Get("/k19"); !ok || string(v) != "19" {
			waitfor.Eventually(b, 10*time.Second, func() error { return converged(da, db) })
		}
		total += time.Since(start)
		n++
		r.stop()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "µs-current")
	b.ReportMetric(float64(a.store.size("notes")), "B-doc")
}

// BenchmarkWatchThenPeerWrites: node a opens and watches a document no
// node has written yet; right after a's Open returns, connected node b,
// which has the document open, writes to it. Reported: µs from the write
// until a's watcher has it. b's update reaches a by gossip when b already
// knows that a subscribed to the document; when it does not yet (a's
// subscription is still on its way), a must get it some other way, and
// anti-entropy is off here.
func BenchmarkWatchThenPeerWrites(b *testing.B) {
	a := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
	w := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
	connect(b, a, w)
	ctx := context.Background()
	var total, worst time.Duration
	n := 0
	for b.Loop() {
		name := fmt.Sprintf("plan%d", n)
		dw := open(b, w, name)
		da, err := a.m.Open(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		watch := da.Watch(16)
		start := time.Now()
		if err := dw.Set(ctx, "w@"+w.h.ID().String(), "/goal", json.RawMessage(`"ship"`)); err != nil {
			b.Fatal(err)
		}
		select {
		case <-watch.C:
		case <-time.After(20 * time.Second):
			b.Fatal("the watcher never saw the write")
		}
		d := time.Since(start)
		total += d
		worst = max(worst, d)
		n++
		watch.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "µs-seen")
	b.ReportMetric(float64(worst.Microseconds()), "µs-worst")
}

// BenchmarkPeerWritesRightAfterConnect: node a watches a document; a new
// node b opens it, connects to a and writes at once, before the two have
// told each other which topics they follow. Reported: µs from the write
// until a's watcher has it (anti-entropy off).
func BenchmarkPeerWritesRightAfterConnect(b *testing.B) {
	a := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
	da := open(b, a, "plan")
	watch := da.Watch(16)
	ctx := context.Background()
	var total, worst time.Duration
	n := 0
	for b.Loop() {
		w := newReplica(b, nil, nil, crdt.WithCatchupInterval(time.Hour))
		dw := open(b, w, "plan")
		connect(b, w, a)
		start := time.Now()
		if err := dw.Set(ctx, "w@"+w.h.ID().String(), "/goal", json.RawMessage(fmt.Sprint(n))); err != nil {
			b.Fatal(err)
		}
		for seen := false; !seen; {
			select {
			case c := <-watch.C:
				seen = c.Remote && c.Source == "w@"+w.h.ID().String()
			case <-time.After(20 * time.Second):
				b.Fatal("the watcher never saw the write")
			}
		}
		d := time.Since(start)
		total += d
		worst = max(worst, d)
		n++
		w.stop()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "µs-seen")
	b.ReportMetric(float64(worst.Microseconds()), "µs-worst")
}
