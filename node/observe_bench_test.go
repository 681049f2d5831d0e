package node

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

// BenchmarkObserverEmit is the router's commonest event, a message-sent,
// with the subscribers a running node has: one that wants everything (the
// local API's events --follow, drained as it goes) and one that wants only
// cards-received (watchPeers), which never drains: it should not be sent
// to at all.
func BenchmarkObserverEmit(b *testing.B) {
	o, err := newObserver("", 1000, AuditConfig{})
	if err != nil {
		b.Fatal(err)
	}
	all := o.Subscribe(1024)
	cards := o.Subscribe(256, protocol.EvtCardsReceived)
	defer cards.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range all.C {
		}
	}()
	ev := protocol.Event{Type: protocol.EvtMessageSent, Time: time.Now(), EnvelopeID: "0195f1a2-7c3e-7000-8000-000000000001",
		Sender: "t0@12D3KooWAbc", Recipient: "t1@12D3KooWAbc", MessageType: envelope.TypeRequest, Path: protocol.PathLocal,
		Latency: 40 * time.Microsecond, Success: true, SourceTier: 1, TargetTier: 1}
	b.ReportAllocs()
	for b.Loop() {
		o.Emit(ev)
	}
	b.StopTimer()
	all.Close()
	<-done
}

// BenchmarkAuditLine encodes a cross-tier broadcast's audit line, by hand
// as the Observer does and with encoding/json, which writes the same bytes.
func BenchmarkAuditLine(b *testing.B) {
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		b.Fatal(err)
	}
	ev := localapi.Event{Type: protocol.EvtMessageReceived, Time: time.Now(), EnvelopeID: "0195f1a2-7c3e-7000-8000-000000000001",
		Sender: "sun@" + p.String(), Recipient: "a1@12D3KooWAbc", MessageType: envelope.TypeNotification, Path: protocol.PathBroadcast,
		Success: true, Peer: p, SourceTier: 0, TargetTier: 2}
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		var last peerText
		for b.Loop() {
			buf, _ = appendAuditJSON(buf[:0], &ev, &last)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(ev)
		}
	})
}
