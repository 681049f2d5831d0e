package crdt

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// startedManager is a Manager on a loopback host with anti-entropy off
// (one round an hour), closed with the test.
func startedManager(t *testing.T) (*Manager, host.Host) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, ps := pubsubHost(t, ctx)
	m, err := New(h, ps, "test", nopStore{}, WithCatchupInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, h
}

func link(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// writeUnpublished makes a signed update of d that no peer was sent, as
// when it was published before this node could reach them.
func writeUnpublished(t *testing.T, d *Doc, path string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	x, err := d.log.d.Set(path, json.RawMessage(`"ship"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.log.local(d.m.key, "w@"+d.m.replica, x, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	d.lastLocal = time.Now()
}

// TestCatchUpQuestionShowsWhatTheAskerHas: a catch-up request names what
// the asker holds; a server that lacks some of it asks for it at once. Here
// w's update was never published and a reads no digests, so that
// question is the only way a can learn of it.
func TestCatchUpQuestionShowsWhatTheAskerHas(t *testing.T) {
	a, ha := startedManager(t)
	w, hw := startedManager(t)
	link(t, hw, ha)
	ctx := context.Background()
	da, err := a.Open(ctx, "plan")
	if err != nil {
		t.Fatal(err)
	}
	da.dsub.Cancel() // a ignores digests
	dw, err := w.Open(ctx, "plan")
	if err != nil {
		t.Fatal(err)
	}
	writeUnpublished(t, dw, "/goal")
	if err := dw.catchUp(ctx, ha.ID()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if v, ok := da.Get("/goal"); !ok || string(v) != `"ship"` {
			return errors.New("a has not asked w back for what w showed it holds")
		}
		return nil
	})
}

// TestPeerJoiningGetsADigestOfARecentWrite: a node that wrote a document
// recently sends its digest as soon as a peer joins the document's
// topics, not at its next periodic digest (2 s after it opened the
// document here): the peer may have missed that write.
func TestPeerJoiningGetsADigestOfARecentWrite(t *testing.T) {
	w, hw := startedManager(t)
	dw, err := w.Open(context.Background(), "plan")
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	writeUnpublished(t, dw, "/goal")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, psr := pubsubHost(t, ctx)
	link(t, hr, hw)
	// r follows the document's own topic first, and w can send to it,
	// then r joins the digest topic.
	docTopic, err := psr.Join(Topic("test", "plan"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docTopic.Subscribe(); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if !slices.Contains(dw.topic.ListPeers(), hr.ID()) {
			return errors.New("w does not see r on the document's topic")
		}
		return nil
	})
	topic, err := psr.Join(DigestTopic("test", "plan"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	m, err := sub.Next(wait)
	if err != nil {
		t.Fatal(err)
	}
	if dg, ok := readDigest(m.Data); !ok || dg.Clock[w.replica] != 1 {
		t.Fatalf("digest %x, want w's clock", m.Data)
	}
	if took := time.Since(opened); took >= digestEvery {
		t.Fatalf("the digest came %v after w opened the document: the periodic one, not one sent for the joining peer", took)
	}
}

// TestInfoSaysCatchingUpUntilAnswered: a document whose first catch-up
// a peer has not answered yet says so (Info.CatchingUp), and stops
// saying so once the peer answers.
func TestInfoSaysCatchingUpUntilAnswered(t *testing.T) {
	m, h := startedManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, _ := pubsubHost(t, ctx)
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	slow.SetStreamHandler(ID, func(s network.Stream) {
		asked <- struct{}{}
		<-release
		s.Close() // an answer with no update (and no end frame): done
	})
	link(t, h, slow)
	short, cancelShort := context.WithCancel(ctx)
	go func() { <-asked; cancelShort() }()
	d, err := m.Open(short, "plan")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Info().CatchingUp {
		t.Fatal("Info says the document is not catching up while the peer has not answered")
	}
	close(release)
	waitfor.Eventually(t, 5*time.Second, func() error {
		if d.Info().CatchingUp {
			return errors.New("still catching up after the peer answered")
		}
		return nil
	})
}
