package envelope_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
)

// fixedFactory returns a factory whose clock starts at start and advances
// one millisecond per call, and whose IDs count up from 1.
func fixedFactory(start time.Time) *envelope.Factory {
	n, now := 0, start
	return &envelope.Factory{
		Now: func() time.Time {
			t := now
			now = now.Add(time.Millisecond)
			return t
		},
		NewID: func() string {
			n++
			return fmt.Sprintf("id-%d", n)
		},
	}
}

func TestFactoryDeterministic(t *testing.T) {
	start := time.UnixMilli(1767225600000)
	build := func() []*envelope.Envelope {
		f := fixedFactory(start)
		req, err := f.New("mars", "venus", envelope.TypeRequest, map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := f.Reply(req, envelope.TypeResponse, json.RawMessage(`{"ok":true}`))
		if err != nil {
			t.Fatal(err)
		}
		return []*envelope.Envelope{req, resp}
	}
	a, b := build(), build()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
	want := &envelope.Envelope{
		ID: "id-1", SchemaVersion: 1, Sender: "mars", Recipient: "venus",
		Type: envelope.TypeRequest, Timestamp: 1767225600000, Payload: json.RawMessage(`{"n":1}`),
	}
	if !reflect.DeepEqual(a[0], want) {
		t.Errorf("New:\n got %+v\nwant %+v", a[0], want)
	}
	want = &envelope.Envelope{
		ID: "id-2", SchemaVersion: 1, Sender: "venus", Recipient: "mars", CorrelationID: "id-1",
		Type: envelope.TypeResponse, Timestamp: 1767225600001, Payload: json.RawMessage(`{"ok":true}`),
	}
	if !reflect.DeepEqual(a[1], want) {
		t.Errorf("Reply:\n got %+v\nwant %+v", a[1], want)
	}
	// Same envelopes, same bytes.
	for i := range a {
		x, _ := envelope.EncodeCBOR(a[i])
		y, _ := envelope.EncodeCBOR(b[i])
		if string(x) != string(y) {
			t.Errorf("encodings of envelope %d differ", i)
		}
	}
}

func TestFactoryTimestampFloor(t *testing.T) {
	for _, at := range []time.Time{time.Unix(0, 0), time.Unix(-100, 0), {}} {
		f := &envelope.Factory{Now: func() time.Time { return at }, NewID: envelope.NewID}
		e, err := f.New("a", "b", envelope.TypeNotification, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Timestamp != 1 {
			t.Errorf("clock at %v: timestamp %d, want 1", at, e.Timestamp)
		}
	}
}

func TestFactoryZeroValue(t *testing.T) {
	var f envelope.Factory // nil Now and NewID fall back to the defaults
	e, err := f.New("a", "b", envelope.TypeRequest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ID) != 32 || e.Timestamp < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("got %+v", e)
	}
}

func TestNewID(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := make(map[string]bool)
	for range 1000 {
		id := envelope.NewID()
		if !hex32.MatchString(id) {
			t.Fatalf("NewID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestFactoryPayloads(t *testing.T) {
	type point struct {
		X int    `json:"x"`
		S string `json:"s"`
	}
	tests := []struct {
		name    string
		payload any
		want    string
	}{
		{"nil", nil, `null`},
		{"raw message", json.RawMessage(" { \"a\" : 1 } "), `{"a":1}`},
		{"bytes", []byte(`[1, 2]`), `[1,2]`},
		{"empty raw message", json.RawMessage{}, `null`},
		{"nil bytes", []byte(nil), `null`},
		{"struct", point{1, "<b>"}, `{"x":1,"s":"<b>"}`},
		{"map", map[string]any{"b": 2, "a": []int{1}}, `{"a":[1],"b":2}`},
		{"string", "hello", `"hello"`},
		{"number", 3.5, `3.5`},
	}
	f := fixedFactory(time.UnixMilli(1))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := f.New("a", "b", envelope.TypeRequest, tt.payload)
			if err != nil {
				t.Fatal(err)
			}
			if string(e.Payload) != tt.want {
				t.Errorf("payload %s, want %s", e.Payload, tt.want)
			}
		})
	}
	// The factory copies raw payloads: the caller may reuse its buffer.
	buf := []byte(`{"a":1}`)
	e, err := f.New("a", "b", envelope.TypeRequest, buf)
	if err != nil {
		t.Fatal(err)
	}
	buf[2] = 'z'
	if string(e.Payload) != `{"a":1}` {
		t.Errorf("payload aliases the caller's buffer: %s", e.Payload)
	}
}

func TestFactoryRejects(t *testing.T) {
	f := fixedFactory(time.UnixMilli(1))
	tests := []struct {
		name              string
		sender, recipient string
		typ               envelope.Type
		payload           any
		field             string
	}{
		{"bad type", "a", "b", "gossip", nil, "type"},
		{"empty sender", "", "b", envelope.TypeRequest, nil, "sender"},
		{"invalid raw payload", "a", "b", envelope.TypeRequest, json.RawMessage(`{`), "payload"},
		{"unencodable payload", "a", "b", envelope.TypeRequest, make(chan int), "payload"},
		{"NaN payload", "a", "b", envelope.TypeRequest, map[string]float64{"x": nan()}, "payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.New(tt.sender, tt.recipient, tt.typ, tt.payload)
			var ie *envelope.InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("New = %v, want InvalidError on %q", err, tt.field)
			}
		})
	}
	bad := &envelope.Factory{Now: time.Now, NewID: func() string { return "has space" }}
	if _, err := bad.New("a", "b", envelope.TypeRequest, nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("bad id source: %v", err)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

func TestReplyThreads(t *testing.T) {
	f := fixedFactory(time.UnixMilli(1000))
	root, err := f.New("mars", "venus", envelope.TypeTaskProposal, nil)
	if err != nil {
		t.Fatal(err)
	}
	accept, err := f.Reply(root, envelope.TypeTaskAccept, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A reply to a reply stays in the root's thread.
	ack, err := f.Reply(accept, envelope.TypeNotification, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*envelope.Envelope{accept, ack} {
		if e.CorrelationID != root.ID || e.ThreadID() != root.ID {
			t.Errorf("%s: correlation %q, want %q", e.ID, e.CorrelationID, root.ID)
		}
		if e.Metadata != nil {
			t.Errorf("%s: reply carries metadata", e.ID)
		}
	}
	if accept.Sender != "venus" || accept.Recipient != "mars" || ack.Sender != "mars" || ack.Recipient != "venus" {
		t.Errorf("addresses not swapped: %+v %+v", accept, ack)
	}
	// Property 24: proposal, acceptance and what follows share one thread.
	th := envelope.NewThreads(10, 0)
	for _, e := range []*envelope.Envelope{ack, root, accept} {
		th.Add(e)
	}
	if got := th.Thread(root.ID); !reflect.DeepEqual(got, []*envelope.Envelope{root, accept, ack}) {
		t.Errorf("thread = %v", got)
	}
}

func TestReplyToBroadcast(t *testing.T) {
	f := fixedFactory(time.UnixMilli(1000))
	proposal, err := f.New("sun", envelope.Broadcast, envelope.TypeTaskProposal, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Reply follows the addresses blindly: the broadcast marker becomes the sender.
	naive, err := f.Reply(proposal, envelope.TypeTaskAccept, nil)
	if err != nil || naive.Sender != envelope.Broadcast || naive.Recipient != "sun" {
		t.Fatalf("Reply to broadcast = %+v, %v", naive, err)
	}
	accept, err := f.ReplyAs("mars", proposal, envelope.TypeTaskAccept, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept.Sender != "mars" || accept.Recipient != "sun" || accept.CorrelationID != proposal.ID {
		t.Errorf("ReplyAs = %+v", accept)
	}
	if _, err := f.Reply(nil, envelope.TypeResponse, nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("Reply(nil) = %v", err)
	}
}
