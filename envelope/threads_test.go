package envelope_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

func env(id, corr string, ts int64) *envelope.Envelope {
	return &envelope.Envelope{ID: id, SchemaVersion: 1, Sender: "a", Recipient: "b",
		CorrelationID: corr, Type: envelope.TypeNotification, Timestamp: ts, Payload: json.RawMessage(`null`)}
}

func TestThreadsOrder(t *testing.T) {
	th := envelope.NewThreads(100, 0)
	root := env("t1", "", 50)
	a := env("a", "t1", 30)
	b := env("b", "t1", 10)
	c := env("c", "t1", 30) // ties with a: insertion order
	other := env("x", "t2", 20)
	for _, e := range []*envelope.Envelope{a, root, b, other, c} {
		th.Add(e)
	}
	if got, want := th.Thread("t1"), []*envelope.Envelope{b, a, c, root}; !reflect.DeepEqual(got, want) {
		t.Errorf("Thread(t1) = %v, want %v", ids(got), ids(want))
	}
	if got := th.Thread("t2"); len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("Thread(t2) = %v", ids(got))
	}
	// A thread whose root is not held is still found; a root alone is a thread.
	if got := th.Thread("x"); len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("Thread(x) = %v", ids(got))
	}
	if th.Thread("nope") != nil || th.Thread("") != nil {
		t.Error("unknown thread not empty")
	}
	if th.Len() != 5 {
		t.Errorf("Len = %d", th.Len())
	}
}

func TestThreadsSelfCorrelated(t *testing.T) {
	// An envelope whose CorrelationID is its own ID appears once.
	th := envelope.NewThreads(10, 0)
	e := env("t", "t", 1)
	th.Add(e)
	if got := th.Thread("t"); len(got) != 1 {
		t.Errorf("Thread = %v", ids(got))
	}
}

func TestThreadsIgnoresDuplicatesAndNil(t *testing.T) {
	th := envelope.NewThreads(10, 0)
	a := env("a", "t", 1)
	th.Add(a)
	th.Add(env("a", "t", 2)) // retransmission
	th.Add(nil)
	th.Add(env("", "t", 3))
	if th.Len() != 1 || th.Thread("t")[0].ID != a.ID {
		t.Errorf("Len = %d, Thread = %v", th.Len(), ids(th.Thread("t")))
	}
}

func TestThreadsEviction(t *testing.T) {
	th := envelope.NewThreads(3, 0)
	var all []*envelope.Envelope
	for i := range 10 {
		e := env(fmt.Sprintf("m%d", i), fmt.Sprintf("t%d", i%2), int64(i+1))
		all = append(all, e)
		th.Add(e)
	}
	if th.Len() != 3 {
		t.Fatalf("Len = %d", th.Len())
	}
	if got, want := th.Thread("t1"), []*envelope.Envelope{all[7], all[9]}; !reflect.DeepEqual(got, want) {
		t.Errorf("Thread(t1) = %v, want %v", ids(got), ids(want))
	}
	if got, want := th.Thread("t0"), []*envelope.Envelope{all[8]}; !reflect.DeepEqual(got, want) {
		t.Errorf("Thread(t0) = %v, want %v", ids(got), ids(want))
	}
	// An evicted ID may be added again.
	th.Add(all[0])
	if th.Len() != 3 || len(th.Thread("t0")) != 2 {
		t.Errorf("re-add: Len %d, t0 %v", th.Len(), ids(th.Thread("t0")))
	}
	if envelope.NewThreads(0, 0).Len() != 0 {
		t.Error("empty")
	}
	one := envelope.NewThreads(-5, 0) // taken as 1
	one.Add(env("a", "", 1))
	one.Add(env("b", "", 1))
	if one.Len() != 1 || one.Thread("b") == nil {
		t.Errorf("NewThreads(-5): Len %d", one.Len())
	}
}

func TestThreadsLongRun(t *testing.T) {
	// Many evictions: the internal queue is compacted and stays consistent.
	th := envelope.NewThreads(50, 0)
	for i := range 10000 {
		th.Add(env(fmt.Sprintf("m%d", i), fmt.Sprintf("t%d", i%7), int64(i+1)))
	}
	total := 0
	for k := range 7 {
		total += len(th.Thread(fmt.Sprintf("t%d", k)))
	}
	if th.Len() != 50 || total != 50 {
		t.Errorf("Len %d, total in threads %d", th.Len(), total)
	}
}

func TestThreadsConcurrent(t *testing.T) {
	th := envelope.NewThreads(64, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				th.Add(env(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("t%d", i%5), int64(i+1)))
				_ = th.Thread(fmt.Sprintf("t%d", i%5))
				_ = th.Len()
			}
		})
	}
	wg.Wait()
	if th.Len() != 64 {
		t.Errorf("Len = %d", th.Len())
	}
}

func ids(es []*envelope.Envelope) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestThreadsRetransmissionsInLongThreads(t *testing.T) {
	// Duplicates that are not added right after themselves take a place in
	// the bound but are returned and counted once, in long threads too.
	th := envelope.NewThreads(1000, 0)
	var want []*envelope.Envelope
	for i := range 100 {
		e := env(fmt.Sprintf("m%d", i), "t", int64(i+1))
		want = append(want, e)
		th.Add(e)
		if i >= 2 {
			th.Add(env(fmt.Sprintf("m%d", i-2), "t", int64(i+1000))) // a late retransmission
		}
	}
	if got := th.Thread("t"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Thread(t) has %d envelopes, want the first 100 adds in order: %v", len(got), ids(got))
	}
	if th.Len() != 100 {
		t.Fatalf("Len = %d, want 100", th.Len())
	}
}

func TestThreadsKeepCopies(t *testing.T) {
	// The index keeps its own encoding: changing an envelope after adding
	// it, or one that Thread returned, changes nothing held.
	th := envelope.NewThreads(10, 0)
	a := env("a", "t", 1)
	a.Payload = json.RawMessage(`{"n":1}`)
	th.Add(a)
	a.Payload[5] = '9'
	a.Sender = "changed"
	got := th.Thread("t")
	if len(got) != 1 || string(got[0].Payload) != `{"n":1}` || got[0].Sender != "a" {
		t.Fatalf("Thread = %+v", got)
	}
	got[0].Payload[5] = '7'
	if again := th.Thread("t"); string(again[0].Payload) != `{"n":1}` {
		t.Fatalf("a returned envelope changed the index: %s", again[0].Payload)
	}
	// An invalid envelope is not indexed.
	th.Add(&envelope.Envelope{ID: "bad", CorrelationID: "t"})
	if th.Len() != 1 {
		t.Fatalf("Len = %d after an invalid envelope", th.Len())
	}
}

func TestThreadsByteBound(t *testing.T) {
	// Large payloads are bounded by bytes, not by count: a 10,000-entry
	// index of near-megabyte envelopes holds what fits in its byte bound.
	const bound = envelope.MaxEncodedSize * 3
	th := envelope.NewThreads(10000, bound)
	big := strings.Repeat("x", envelope.MaxPayloadSize-1000)
	for i := range 20 {
		e := env(fmt.Sprintf("m%d", i), "t", int64(i+1))
		e.Payload = json.RawMessage(`"` + big + `"`)
		th.Add(e)
	}
	if n, b := th.Len(), th.Bytes(); n < 2 || n > 3 || b > bound {
		t.Fatalf("Len %d, Bytes %d (bound %d)", n, b, bound)
	}
	got := th.Thread("t")
	if last := got[len(got)-1]; last.ID != "m19" || len(last.Payload) != len(big)+2 {
		t.Fatalf("newest held is %s with %d bytes", last.ID, len(last.Payload))
	}
	// Small envelopes after them: they take the place of the oldest large
	// ones they need, and the count bound then evicts the rest.
	for i := range 5000 {
		th.Add(env(fmt.Sprintf("s%d", i), "u", int64(i+1)))
	}
	if n, large := len(th.Thread("u")), len(th.Thread("t")); n != 5000 || large < 1 || large > len(got) || th.Bytes() > bound {
		t.Fatalf("small thread %d (want 5000), large thread %d (of %d), %d bytes", n, large, len(got), th.Bytes())
	}
	for i := range 5000 {
		th.Add(env(fmt.Sprintf("s%d", 5000+i), "u", int64(5000+i+1)))
	}
	if n := len(th.Thread("u")); n != 10000 || len(th.Thread("t")) != 0 || th.Bytes() > bound {
		t.Fatalf("small thread %d (want 10000), large thread %d (want 0), %d bytes", n, len(th.Thread("t")), th.Bytes())
	}
}
