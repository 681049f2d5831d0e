package streamscope_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/streamscope"
	"github.com/nova-node/nova-node/internal/streamscope/scopetest"
)

// openStream is a stream scope of rm attached to service, as a handler
// holds it. Accounting only: nothing is dialed.
func openStream(t *testing.T, rm network.ResourceManager, service string) network.StreamManagementScope {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rm.OpenStream(p, network.DirInbound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Done)
	if err := s.SetProtocol("/nova/test/1.0.0"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetService(service); err != nil {
		t.Fatal(err)
	}
	return s
}

// A reservation is held in the stream's service, grows, is refused past
// a limit (libp2p's default stream limit is 16 MiB) without losing what it
// held, and goes back in full on Release, after which it cannot grow.
func TestMemory(t *testing.T) {
	const svc = "nova.test"
	rm := scopetest.ResourceManager(t, svc, 4)
	s := openStream(t, rm, svc)
	m, err := streamscope.Reserve(s, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	if got := scopetest.Stat(t, rm, svc).Memory; got != 4<<10 {
		t.Fatalf("service holds %d bytes, want %d", got, 4<<10)
	}
	if err := m.Grow(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := m.Grow(512); err != nil || m.Held() != 1<<20 {
		t.Fatalf("a smaller Grow: %v, held %d; want no change", err, m.Held())
	}
	if err := m.Grow(65 << 20); err == nil {
		t.Fatal("65 MiB reserved for one stream")
	}
	if got := scopetest.Stat(t, rm, svc).Memory; got != 1<<20 {
		t.Fatalf("after a refused Grow the service holds %d bytes, want %d", got, 1<<20)
	}
	m.Release()
	m.Release()
	if got := scopetest.Stat(t, rm, svc).Memory; got != 0 {
		t.Fatalf("after Release the service holds %d bytes", got)
	}
	if err := m.Grow(8 << 10); err == nil {
		t.Fatal("Grow after Release succeeded")
	}
}

// CountReads reserves what is read through it on top of what was held,
// up to its max.
func TestCountReads(t *testing.T) {
	const svc = "nova.test"
	rm := scopetest.ResourceManager(t, svc, 4)
	m, err := streamscope.Reserve(openStream(t, rm, svc), 100)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	n, err := io.Copy(io.Discard, m.CountReads(bytes.NewReader(make([]byte, 5000)), 3000))
	if err != nil || n != 5000 {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	if got := m.Held(); got != 3100 {
		t.Fatalf("held %d bytes, want 3100", got)
	}
}
