package discovery

import (
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// NewTestHost starts a libp2p host listening on 127.0.0.1 only, TCP only;
// the caller closes it. It is compiled into the package's tests only,
// so that the internal and the external tests share it.
func NewTestHost(tb testing.TB) (host.Host, crypto.PrivKey) {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := libp2p.New(
		libp2p.Identity(key),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(),
		libp2p.Ping(true),
	)
	if err != nil {
		tb.Fatal(err)
	}
	return h, key
}
