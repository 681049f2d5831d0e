package protocol

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
)

// FuzzDecodeMsg: frame bodies from a peer never panic the decoder; what it
// accepts is well formed and re-encodes to something it accepts again.
func FuzzDecodeMsg(f *testing.F) {
	env, _ := envelope.NewFactory().New("a@x", "b", envelope.TypeRequest, map[string]int{"n": 1})
	for _, m := range []*wireMsg{
		{Kind: kindHello, Cards: [][]byte{[]byte("card")}},
		{Kind: kindHello, Full: true, Roster: []string{"alice", "bob"}},
		{Kind: kindEnvelope, Seq: 1, Env: env},
		{Kind: kindAck, Seq: 9},
		{Kind: kindNack, Seq: 2, Code: "TIER_VIOLATION", Msg: "no"},
	} {
		b, err := encodeMsg(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x61, 0x6b, 0x18, 0x63})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMsg(b)
		if err != nil {
			return
		}
		if m.Kind < kindHello || m.Kind > kindNack || len(m.Cards) > maxHelloCards || len(m.Roster) > maxHelloCards {
			t.Fatalf("accepted %+v", m)
		}
		for _, id := range m.Roster {
			if id == "" || len(id) > envelope.MaxAgentLen {
				t.Fatalf("accepted a roster id of %d bytes", len(id))
			}
		}
		if m.Kind == kindEnvelope && len(m.Env) == 0 {
			t.Fatal("envelope frame without envelope accepted")
		}
		out := &wireMsg{Kind: m.Kind, Seq: m.Seq, Cards: m.Cards, Code: m.Code, Msg: m.Msg, Full: m.Full, Roster: m.Roster}
		if m.Kind == kindEnvelope {
			env, err := envelope.DecodeCBOR(m.Env)
			if err != nil {
				return // answered with a nack by the receiver
			}
			out.Env = env
		}
		again, err := encodeMsg(out)
		if err != nil {
			t.Fatalf("an accepted message does not re-encode: %v", err)
		}
		m2, err := decodeMsg(again)
		if err != nil {
			t.Fatalf("re-encoded message refused: %v", err)
		}
		if m2.Kind != out.Kind || m2.Seq != out.Seq || len(m2.Cards) != len(out.Cards) || m2.Full != out.Full || len(m2.Roster) != len(out.Roster) {
			t.Fatal("re-decoded message differs")
		}
		if out.Env != nil {
			env2, err := envelope.DecodeCBOR(m2.Env)
			if err != nil {
				t.Fatalf("re-encoded envelope refused: %v", err)
			}
			b1, _ := envelope.EncodeCBOR(out.Env)
			b2, _ := envelope.EncodeCBOR(env2)
			if !bytes.Equal(b1, b2) {
				t.Fatal("envelope encoding is not stable")
			}
		}
	})
}

// A hello roster is bounded like its cards: in length and per name.
func TestHelloRosterBounded(t *testing.T) {
	long := make([]string, maxHelloCards+1)
	for i := range long {
		long[i] = "a"
	}
	for _, m := range []*wireMsg{
		{Kind: kindHello, Full: true, Roster: long},
		{Kind: kindHello, Full: true, Roster: []string{""}},
		{Kind: kindHello, Full: true, Roster: []string{string(bytes.Repeat([]byte("x"), envelope.MaxAgentLen+1))}},
	} {
		b, err := encodeMsg(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeMsg(b); err == nil {
			t.Errorf("a hello roster of %d names (first %d bytes) was accepted", len(m.Roster), len(m.Roster[0]))
		}
	}
	b, _ := encodeMsg(&wireMsg{Kind: kindHello, Full: true, Roster: []string{"alice"}})
	if m, err := decodeMsg(b); err != nil || !m.Full || len(m.Roster) != 1 {
		t.Fatalf("a sound roster: %+v, %v", m, err)
	}
}

func TestBoundedForgetsOldest(t *testing.T) {
	const bound = 3
	b := newBounded[int, int](bound)
	for i := range 20 {
		b.put(i, i)
		if n := b.len(); n > 2*bound {
			t.Fatalf("after %d puts: %d keys held, bound is %d", i+1, n, 2*bound)
		}
		// The bound most recent keys are always remembered.
		for k := max(0, i-bound+1); k <= i; k++ {
			if v, ok := b.get(k); !ok || v != k {
				t.Fatalf("after %d puts: recent key %d lost", i+1, k)
			}
		}
	}
	if _, ok := b.get(0); ok {
		t.Fatal("oldest key kept past the bound")
	}
	b.put(19, 7) // update in place does not evict
	if v, _ := b.get(19); v != 7 || b.len() > 2*bound {
		t.Fatalf("update: %d, %d keys", v, b.len())
	}
	// A key re-put from the old generation becomes recent again.
	b = newBounded[int, int](bound)
	for i := range 4 { // 0,1,2 rotate out of cur when 3 arrives
		b.put(i, i)
	}
	b.put(0, 0)
	for i := 4; i < 6; i++ { // fills cur (3, 0, 4) and rotates at 5
		b.put(i, i)
	}
	if _, ok := b.get(0); !ok {
		t.Fatal("a key put again was forgotten as old")
	}
	if !b.putNew(100, 1) || b.putNew(100, 2) {
		t.Fatal("putNew")
	}
}

// appendEnvFrame must write exactly what the reflective encoder writes for
// envMsg, or peers decoding with a strict mode could disagree with us.
func TestAppendEnvFrameMatchesEncoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ch := rapid.StringMatching(`[0-9a-f]{0,64}`).Draw(t, "ch")
		seq := rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64(), rapid.Uint64Range(65530, 65540), rapid.Uint64Range(1<<32-2, 1<<32+2)).Draw(t, "seq")
		ackNow := rapid.Bool().Draw(t, "ackNow")
		env, err := envelope.EncodeCBOR(&envelope.Envelope{ID: "e1", SchemaVersion: 1, Sender: "a@x", Recipient: "b@y", Type: envelope.TypeNotification,
			Timestamp: 1, Payload: []byte(rapid.StringMatching(`"[a-z]{0,300}"`).Draw(t, "payload"))})
		if err != nil {
			t.Fatal(err)
		}
		want, err := envelope.EncMode().Marshal(&envMsg{Kind: kindEnvelope, Seq: seq, Ch: ch, Env: env, AckNow: ackNow})
		if err != nil {
			t.Fatal(err)
		}
		got := appendEnvFrame(nil, ch, seq, env, ackNow)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendEnvFrame\n got %x\nwant %x", got, want)
		}
		if n := envFrameLen(ch, seq, env, ackNow); n != len(got) {
			t.Fatalf("envFrameLen %d, frame is %d bytes", n, len(got))
		}
	})
}
