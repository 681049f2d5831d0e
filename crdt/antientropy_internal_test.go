package crdt

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
)

// nopStore keeps nothing.
type nopStore struct{}

func (nopStore) LoadDoc(string) ([]byte, [][]byte, error) { return nil, nil, nil }
func (nopStore) AppendDelta(string, []byte) error         { return nil }
func (nopStore) AppendDeltas(string, [][]byte) error      { return nil }
func (nopStore) SaveDoc(string, []byte) error             { return nil }
func (nopStore) DocNames() ([]string, error)              { return nil, nil }
func (nopStore) DeleteDoc(string) error                   { return nil }

// pubsubHost is a loopback host with GossipSub running until ctx ends; the
// host closes with the test.
func pubsubHost(t *testing.T, ctx context.Context) (host.Host, *pubsub.PubSub) {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	return h, ps
}

// Anti-entropy sleeps between its periodic rounds, however long the
// period, and runs a round every 200 ms only while a document holds
// updates it cannot apply: a document that starts holding one wakes it.
func TestAntiEntropyWakesOnlyForHeldUpdates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, ps := pubsubHost(t, ctx)
	m, err := New(h, ps, "test", nopStore{}, WithCatchupInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rounds := make(chan bool, 100)
	m.afterRound = func(holding bool) { rounds <- holding }
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := m.Open(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-rounds:
		t.Fatal("a round with nothing held and an hour to the next periodic one")
	case <-time.After(700 * time.Millisecond):
	}
	d.mu.Lock()
	waiting := &Update{Raw: []byte{1}, Hash: Hash{1}, Doc: "doc", First: 2, Last: 2, Prev: Hash{9}} // its prev never comes
	d.log.hold(waiting, "p", false, waiting.Prev)
	d.mu.Unlock()
	m.kickHeld()
	start := time.Now()
	for i := range 3 {
		select {
		case holding := <-rounds:
			if !holding {
				t.Fatalf("round %d: the document's held update not seen", i)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: no round while a document holds an update", i)
		}
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("three rounds took %v, want about 600 ms", took)
	}
	d.mu.Lock()
	d.log.unhold(d.log.pending[waiting.Hash])
	d.mu.Unlock()
	<-rounds // the round that finds nothing held
	select {
	case <-rounds:
		t.Fatal("rounds go on with nothing held")
	case <-time.After(700 * time.Millisecond):
	}
}
