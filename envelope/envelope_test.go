package envelope_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// valid returns a small valid envelope with every optional field set.
func valid() *envelope.Envelope {
	return &envelope.Envelope{
		ID:            "0123456789abcdef0123456789abcdef",
		SchemaVersion: envelope.SchemaVersion,
		Sender:        "mars@12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN",
		Recipient:     "venus",
		CorrelationID: "thread-1",
		Type:          envelope.TypeRequest,
		Timestamp:     1767225600000,
		Payload:       json.RawMessage(`{"task":"map the craters","n":3}`),
		Metadata: &envelope.Metadata{
			Tier:                    2,
			SandboxID:               "sandbox-a",
			RoutingHint:             envelope.RoutingHintCapability,
			EscalationJustification: "needs the orchestrator:\n\tcraters overlap",
		},
	}
}

// normalized returns e as decoders return it: a nil or empty payload is null.
func normalized(e *envelope.Envelope) *envelope.Envelope {
	c := e.Clone()
	if len(c.Payload) == 0 {
		c.Payload = json.RawMessage("null")
	}
	return c
}

func TestValidate(t *testing.T) {
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	tests := []struct {
		name   string
		mutate func(e *envelope.Envelope)
		field  string // expected InvalidError.Field; "-" means valid
	}{
		{"valid", func(e *envelope.Envelope) {}, "-"},
		{"minimal", func(e *envelope.Envelope) { e.CorrelationID = ""; e.Metadata = nil; e.Payload = nil }, "-"},
		{"empty payload is null", func(e *envelope.Envelope) { e.Payload = json.RawMessage{} }, "-"},
		{"broadcast recipient", func(e *envelope.Envelope) { e.Recipient = envelope.Broadcast }, "-"},
		{"zero metadata", func(e *envelope.Envelope) { e.Metadata = &envelope.Metadata{} }, "-"},
		{"non-compact payload", func(e *envelope.Envelope) { e.Payload = json.RawMessage(" [ 1 , 2 ] ") }, "-"},
		{"scalar payload", func(e *envelope.Envelope) { e.Payload = json.RawMessage(`"text"`) }, "-"},
		{"unicode agents", func(e *envelope.Envelope) { e.Sender = "Jupiter ♃ agent"; e.Recipient = "土星" }, "-"},
		{"max lengths", func(e *envelope.Envelope) {
			e.ID = long(envelope.MaxIDLen, "i")
			e.CorrelationID = long(envelope.MaxIDLen, "c")
			e.Sender = long(envelope.MaxAgentLen, "s")
			e.Recipient = long(envelope.MaxAgentLen, "r")
			e.Metadata.SandboxID = long(envelope.MaxSandboxLen, "x")
			e.Metadata.EscalationJustification = long(envelope.MaxJustificationLen, "j")
		}, "-"},

		{"empty id", func(e *envelope.Envelope) { e.ID = "" }, "id"},
		{"long id", func(e *envelope.Envelope) { e.ID = long(envelope.MaxIDLen+1, "i") }, "id"},
		{"id with space", func(e *envelope.Envelope) { e.ID = "a b" }, "id"},
		{"id with control", func(e *envelope.Envelope) { e.ID = "a\x00" }, "id"},
		{"id non-ascii", func(e *envelope.Envelope) { e.ID = "idé" }, "id"},
		{"empty sender", func(e *envelope.Envelope) { e.Sender = "" }, "sender"},
		{"long sender", func(e *envelope.Envelope) { e.Sender = long(envelope.MaxAgentLen+1, "s") }, "sender"},
		{"sender control", func(e *envelope.Envelope) { e.Sender = "mars\n" }, "sender"},
		{"sender c1 control", func(e *envelope.Envelope) { e.Sender = "mars\u0085" }, "sender"},
		{"sender invalid utf-8", func(e *envelope.Envelope) { e.Sender = "mars\xff" }, "sender"},
		{"empty recipient", func(e *envelope.Envelope) { e.Recipient = "" }, "recipient"},
		{"long recipient", func(e *envelope.Envelope) { e.Recipient = long(envelope.MaxAgentLen+1, "r") }, "recipient"},
		{"recipient control", func(e *envelope.Envelope) { e.Recipient = "\x7fvenus" }, "recipient"},
		{"long correlation id", func(e *envelope.Envelope) { e.CorrelationID = long(envelope.MaxIDLen+1, "c") }, "correlationId"},
		{"correlation id with space", func(e *envelope.Envelope) { e.CorrelationID = "a b" }, "correlationId"},
		{"empty type", func(e *envelope.Envelope) { e.Type = "" }, "type"},
		{"unknown type", func(e *envelope.Envelope) { e.Type = "Request" }, "type"},
		{"zero timestamp", func(e *envelope.Envelope) { e.Timestamp = 0 }, "timestamp"},
		{"negative timestamp", func(e *envelope.Envelope) { e.Timestamp = -1 }, "timestamp"},
		{"payload not json", func(e *envelope.Envelope) { e.Payload = json.RawMessage(`{"a":}`) }, "payload"},
		{"payload two values", func(e *envelope.Envelope) { e.Payload = json.RawMessage(`1 2`) }, "payload"},
		{"payload invalid utf-8", func(e *envelope.Envelope) { e.Payload = json.RawMessage("\"\xff\"") }, "payload"},
		{"payload too large", func(e *envelope.Envelope) {
			e.Payload = json.RawMessage(`"` + long(envelope.MaxPayloadSize-1, "p") + `"`)
		}, "payload"},
		{"payload too deep", func(e *envelope.Envelope) {
			e.Payload = json.RawMessage(long(envelope.MaxPayloadDepth+1, "[") + long(envelope.MaxPayloadDepth+1, "]"))
		}, "payload"},
		{"tier 4", func(e *envelope.Envelope) { e.Metadata.Tier = 4 }, "metadata.tier"},
		{"tier 255", func(e *envelope.Envelope) { e.Metadata.Tier = 255 }, "metadata.tier"},
		{"routing hint", func(e *envelope.Envelope) { e.Metadata.RoutingHint = "agent" }, "metadata.routingHint"},
		{"long sandbox", func(e *envelope.Envelope) { e.Metadata.SandboxID = long(envelope.MaxSandboxLen+1, "x") }, "metadata.sandboxId"},
		{"sandbox control", func(e *envelope.Envelope) { e.Metadata.SandboxID = "a\tb" }, "metadata.sandboxId"},
		{"long justification", func(e *envelope.Envelope) {
			e.Metadata.EscalationJustification = long(envelope.MaxJustificationLen+1, "j")
		}, "metadata.escalationJustification"},
		{"justification control", func(e *envelope.Envelope) { e.Metadata.EscalationJustification = "bell\a" }, "metadata.escalationJustification"},
		{"justification invalid utf-8", func(e *envelope.Envelope) { e.Metadata.EscalationJustification = "\xc3" }, "metadata.escalationJustification"},
		{"encoded size over the limit", func(e *envelope.Envelope) {
			// Every part within its limit, the whole too large.
			e.Payload = json.RawMessage(`"` + long(envelope.MaxPayloadSize-2, "p") + `"`)
			e.Metadata.EscalationJustification = long(envelope.MaxJustificationLen, `"`)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := valid()
			tt.mutate(e)
			err := e.Validate()
			// ValidateHeader applies the same rules except the payload's.
			switch herr := e.ValidateHeader(); {
			case tt.field == "payload" || tt.field == "-":
				if herr != nil {
					t.Errorf("ValidateHeader() = %v, want nil", herr)
				}
			case herr == nil || herr.Error() != err.Error():
				t.Errorf("ValidateHeader() = %v, want %v", herr, err)
			}
			if tt.field == "-" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ie *envelope.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Validate() = %v, want *InvalidError", err)
			}
			if ie.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", ie.Field, tt.field, err)
			}
			if !errors.Is(err, envelope.ErrInvalid) || errors.Is(err, envelope.ErrSchemaVersionMismatch) {
				t.Errorf("errors.Is wrong for %v", err)
			}
			checkMessage(t, err, envelope.CodeInvalidEnvelope)
			if tt.field != "" && !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name field %q", err, tt.field)
			}
		})
	}
}

// checkMessage checks an error's code and the style of its message.
func checkMessage(t *testing.T, err error, code string) {
	t.Helper()
	coded, ok := err.(interface{ Code() string })
	if !ok {
		t.Fatalf("%T has no Code()", err)
	}
	if coded.Code() != code {
		t.Errorf("Code() = %q, want %q", coded.Code(), code)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "envelope: ") {
		t.Errorf("message %q lacks the package prefix", msg)
	}
	if len(msg) > 400 {
		t.Errorf("message is %d bytes long", len(msg))
	}
}

func TestValidateSchemaVersionFirst(t *testing.T) {
	for _, v := range []int{0, 2, 7, -1} {
		e := valid()
		e.SchemaVersion = v
		e.ID = "" // also invalid: the version must win
		err := e.Validate()
		var sv *envelope.SchemaVersionError
		if !errors.As(err, &sv) {
			t.Fatalf("version %d: Validate() = %v, want *SchemaVersionError", v, err)
		}
		if sv.Expected != envelope.SchemaVersion || sv.Actual != v {
			t.Errorf("got %+v", sv)
		}
		if !errors.Is(err, envelope.ErrSchemaVersionMismatch) || errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("errors.Is wrong for %v", err)
		}
		checkMessage(t, err, envelope.CodeSchemaVersionMismatch)
	}
}

func TestValidateNil(t *testing.T) {
	var e *envelope.Envelope
	if err := e.Validate(); !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("nil.Validate() = %v", err)
	}
	if e.Clone() != nil || e.ThreadID() != "" {
		t.Fatal("nil Clone/ThreadID")
	}
}

func TestErrorMessages(t *testing.T) {
	sv := &envelope.SchemaVersionError{Expected: 1, Actual: 7}
	if got, want := sv.Error(), "envelope: schema version mismatch: expected 1, got 7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ie := &envelope.InvalidError{Field: "sender", Reason: "must not be empty"}
	if got, want := ie.Error(), "envelope: invalid sender: must not be empty"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ie = &envelope.InvalidError{Reason: "nil envelope"}
	if got, want := ie.Error(), "envelope: invalid envelope: nil envelope"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if envelope.ErrInvalid.Error() != "envelope: invalid envelope" ||
		envelope.ErrSchemaVersionMismatch.Error() != "envelope: schema version mismatch" {
		t.Error("sentinel messages changed")
	}
	// A hostile value is quoted, and only in part.
	e := valid()
	e.Type = envelope.Type(strings.Repeat("x", 10000))
	if err := e.Validate(); err == nil || len(err.Error()) > 200 {
		t.Errorf("long type in message: %d bytes", len(err.Error()))
	}
}

func TestTypes(t *testing.T) {
	want := []envelope.Type{"request", "response", "notification", "task-proposal", "task-accept",
		"task-reject", "stream-start", "stream-data", "stream-end", "error"}
	got := envelope.Types()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Types() = %v", got)
	}
	got[0] = "mutated"
	if envelope.Types()[0] != envelope.TypeRequest {
		t.Fatal("Types() shares its slice")
	}
	for _, ty := range want {
		p, err := envelope.ParseType(string(ty))
		if err != nil || p != ty || !ty.Valid() {
			t.Errorf("ParseType(%q) = %q, %v", ty, p, err)
		}
	}
	for _, s := range []string{"", "Request", "REQUEST", " request", "request ", "task_proposal", "stream", "*"} {
		_, err := envelope.ParseType(s)
		var ie *envelope.InvalidError
		if !errors.As(err, &ie) || ie.Field != "type" || envelope.Type(s).Valid() {
			t.Errorf("ParseType(%q) = %v", s, err)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	e := valid()
	c := e.Clone()
	if !reflect.DeepEqual(e, c) {
		t.Fatal("clone differs")
	}
	c.Payload[0] = '['
	c.Metadata.Tier = 0
	if e.Payload[0] != '{' || e.Metadata.Tier != 2 {
		t.Fatal("clone shares memory with the original")
	}
}

func TestThreadID(t *testing.T) {
	e := valid()
	if e.ThreadID() != "thread-1" {
		t.Error("ThreadID should be the correlation id")
	}
	e.CorrelationID = ""
	if e.ThreadID() != e.ID {
		t.Error("ThreadID should fall back to the id")
	}
}
