package connhealth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/connhealth"
)

func loopbackHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// A peer that has had no connection for a while leaves the peerstore but
// for its addresses; a connected one stays, and one that connects again
// is known again.
func TestPeersWithoutConnectionAreForgotten(t *testing.T) {
	a, b, c := loopbackHost(t), loopbackHost(t), loopbackHost(t)
	ctx, cancel := context.WithCancel(t.Context())
	var forgot atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() { connhealth.ForgetPeers(ctx, a, 50*time.Millisecond, &forgot, zap.NewNop().Sugar()) })
	defer func() { cancel(); wg.Wait() }()

	known := func(p peer.ID) error {
		protos, err := a.Peerstore().GetProtocols(p)
		if err != nil {
			return err
		}
		if len(protos) == 0 {
			return fmt.Errorf("no protocols of %s", p)
		}
		return nil
	}
	connect := func(p host.Host) {
		t.Helper()
		if err := a.Connect(t.Context(), peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			t.Fatal(err)
		}
		waitfor.Eventually(t, 30*time.Second, func() error { return known(p.ID()) })
	}
	connect(b)
	connect(c)

	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 30*time.Second, func() error {
		if forgot.Load() == 0 {
			return errors.New("nothing forgotten yet")
		}
		return nil
	})
	if err := known(b.ID()); err == nil {
		t.Fatalf("%s's protocols kept after it was forgotten", b.ID())
	}
	if len(a.Peerstore().Addrs(b.ID())) == 0 {
		t.Errorf("%s's addresses went with the rest", b.ID())
	}
	if err := known(c.ID()); err != nil {
		t.Errorf("connected peer forgotten: %v", err)
	}
	if n := forgot.Load(); n != 1 {
		t.Errorf("%d peers forgotten, want 1", n)
	}
	connect(b) // identify writes them again
}
