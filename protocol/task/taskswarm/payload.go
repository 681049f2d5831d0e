package taskswarm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// Limits on swarms and on the payloads this package decodes. Lengths are in
// bytes.
const (
	MaxSubTasks       = 256                           // sub-tasks per swarm
	MaxDescriptionLen = negotiation.MaxDescriptionLen // task and sub-task descriptions
	MaxCapabilities   = negotiation.MaxCapabilities   // required capabilities
	MaxIDLen          = envelope.MaxIDLen             // swarm and sub-task ids
	MaxResultSize     = 64 << 10                      // one sub-task result (compact JSON)
	MaxErrorLen       = 4096                          // a failure message
	MaxPayloadSize    = 128 << 10                     // an encoded Task or Result
	MaxAttempt        = 1 << 20                       // highest attempt number accepted
	MaxSharedKeyLen   = 128                           // a SharedState key
	MaxSharedValue    = 64 << 10                      // a SharedState value
)

// Task is the payload of a sub-task "request" envelope, and what
// [ParticipantConfig.Work] is given.
type Task struct {
	SwarmID              string   `json:"swarmId"`
	SubTaskID            string   `json:"subTaskId"`
	Attempt              int      `json:"attempt"`
	Description          string   `json:"description"`
	RequiredCapabilities []string `json:"requiredCapabilities"`
	// Thread is the correlation thread of the request envelope (not sent
	// in the payload; filled in by the Participant).
	Thread string `json:"-"`
	// From is the coordinating agent that sent the request (not sent in
	// the payload; filled in by the Participant).
	From string `json:"-"`
}

// Validate returns nil or an [*InvalidError] naming the first bad field.
func (t Task) Validate() error {
	if err := checkID("swarmId", t.SwarmID); err != nil {
		return err
	}
	if err := checkID("subTaskId", t.SubTaskID); err != nil {
		return err
	}
	if t.Attempt < 1 || t.Attempt > MaxAttempt {
		return invalid("attempt", "must be 1..%d, got %d", MaxAttempt, t.Attempt)
	}
	if err := checkText("description", t.Description, MaxDescriptionLen); err != nil {
		return err
	}
	return checkCaps("requiredCapabilities", t.RequiredCapabilities)
}

// DecodeTask decodes and validates a sub-task request payload. Input is
// untrusted: at most MaxPayloadSize bytes, swarmId, subTaskId, attempt and
// description required, unknown fields ignored.
func DecodeTask(b []byte) (Task, error) {
	if err := probe(b, MayBeTask(b), errNotTask); err != nil {
		return Task{}, err
	}
	var w struct {
		SwarmID              *string  `json:"swarmId"`
		SubTaskID            *string  `json:"subTaskId"`
		Attempt              *int     `json:"attempt"`
		Description          *string  `json:"description"`
		RequiredCapabilities []string `json:"requiredCapabilities"`
	}
	if err := decodeObject(b, &w); err != nil {
		return Task{}, err
	}
	switch {
	case w.SwarmID == nil:
		return Task{}, invalid("swarmId", "required")
	case w.SubTaskID == nil:
		return Task{}, invalid("subTaskId", "required")
	case w.Attempt == nil:
		return Task{}, invalid("attempt", "required")
	case w.Description == nil:
		return Task{}, invalid("description", "required")
	}
	t := Task{SwarmID: *w.SwarmID, SubTaskID: *w.SubTaskID, Attempt: *w.Attempt,
		Description: *w.Description, RequiredCapabilities: w.RequiredCapabilities}
	if t.RequiredCapabilities == nil {
		t.RequiredCapabilities = []string{}
	}
	return t, t.Validate()
}

// Result is the payload of the answer to a sub-task request: a "response"
// envelope carries Result, an "error" envelope carries Error (and Code and
// Message, so that readers of the router's {code, message} error payload
// understand it too).
type Result struct {
	SwarmID   string          `json:"swarmId"`
	SubTaskID string          `json:"subTaskId"`
	Attempt   int             `json:"attempt"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
}

// Validate returns nil or an [*InvalidError] naming the first bad field.
func (r Result) Validate() error {
	if err := checkID("swarmId", r.SwarmID); err != nil {
		return err
	}
	if err := checkID("subTaskId", r.SubTaskID); err != nil {
		return err
	}
	if r.Attempt < 1 || r.Attempt > MaxAttempt {
		return invalid("attempt", "must be 1..%d, got %d", MaxAttempt, r.Attempt)
	}
	if len(r.Result) > MaxResultSize {
		return invalid("result", "%d bytes, over the %d-byte limit", len(r.Result), MaxResultSize)
	}
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		return invalid("result", "not valid json")
	}
	for _, f := range []struct{ name, v string }{{"error", r.Error}, {"message", r.Message}} {
		if len(f.v) > MaxErrorLen {
			return invalid(f.name, "%d bytes, over the %d-byte limit", len(f.v), MaxErrorLen)
		}
		if !utf8.ValidString(f.v) {
			return invalid(f.name, "not valid utf-8")
		}
	}
	if len(r.Code) > 64 {
		return invalid("code", "%d bytes, over the 64-byte limit", len(r.Code))
	}
	return nil
}

// reason returns the failure message of an error answer.
func (r Result) reason() string {
	msg := r.Error
	if msg == "" {
		msg = r.Message
	}
	if msg == "" {
		msg = "the agent reported a failure without a message"
	}
	if r.Code != "" && !strings.Contains(msg, r.Code) {
		msg = r.Code + ": " + msg
	}
	return msg
}

// DecodeResult decodes and validates a sub-task answer payload, with the
// same rules for untrusted input as [DecodeTask].
func DecodeResult(b []byte) (Result, error) {
	var w struct {
		SwarmID   *string         `json:"swarmId"`
		SubTaskID *string         `json:"subTaskId"`
		Attempt   *int            `json:"attempt"`
		Result    json.RawMessage `json:"result"`
		Error     string          `json:"error"`
		Code      string          `json:"code"`
		Message   string          `json:"message"`
	}
	if err := decodeObject(b, &w); err != nil {
		return Result{}, err
	}
	switch {
	case w.SwarmID == nil:
		return Result{}, invalid("swarmId", "required")
	case w.SubTaskID == nil:
		return Result{}, invalid("subTaskId", "required")
	case w.Attempt == nil:
		return Result{}, invalid("attempt", "required")
	}
	r := Result{SwarmID: *w.SwarmID, SubTaskID: *w.SubTaskID, Attempt: *w.Attempt,
		Error: w.Error, Code: w.Code, Message: w.Message}
	if len(w.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Result); err != nil {
			return Result{}, invalid("result", "not valid json")
		}
		r.Result = buf.Bytes()
	}
	return r, r.Validate()
}

// Notice kinds: the "kind" of a [Notice].
const (
	NoticeReleased   = "swarm-released"   // to an acceptor that is not needed
	NoticeCompleted  = "swarm-completed"  // to the creator: the final report
	NoticeFailed     = "swarm-failed"     // to the creator: the swarm failed
	NoticeEscalation = "swarm-escalation" // to the L0 agent: a sub-task has no capable agent left
)

// Notice is the payload of the "notification" envelopes a coordinator sends.
type Notice struct {
	Kind            string                     `json:"kind"`
	SwarmID         string                     `json:"swarmId"`
	TaskDescription string                     `json:"taskDescription,omitempty"`
	Status          Status                     `json:"status,omitempty"`
	SubTaskID       string                     `json:"subTaskId,omitempty"`
	Reason          string                     `json:"reason,omitempty"`
	Results         map[string]json.RawMessage `json:"results,omitempty"`
	// ResultsOmitted is set when the results did not fit in one envelope;
	// read them with Coordinator.Get or from the shared document.
	ResultsOmitted bool `json:"resultsOmitted,omitempty"`
}

// DecodeNotice decodes a notification payload sent by a coordinator.
func DecodeNotice(b []byte) (Notice, error) {
	if err := probe(b, MayBeNotice(b), errNotNotice); err != nil {
		return Notice{}, err
	}
	var n Notice
	if err := decodeObject(b, &n); err != nil {
		return Notice{}, err
	}
	if !strings.HasPrefix(n.Kind, "swarm-") {
		return Notice{}, invalid("kind", "%s is not a swarm notice", wirecodec.Quote(n.Kind))
	}
	return n, checkID("swarmId", n.SwarmID)
}

// errNotObject is shared: nodes probe every request and notification
// payload for a sub-task or a swarm notice, and most are not objects.
var errNotObject = &InvalidError{Reason: "must be a JSON object"}

// The probes' refusals, shared for the same reason.
var (
	errNotTask   = &InvalidError{Field: "swarmId", Reason: "required (not a sub-task request)"}
	errNotNotice = &InvalidError{Field: "kind", Reason: "not a swarm notice"}
)

// MayBeTask reports whether b could decode as a Task, without decoding it:
// false means [DecodeTask] would refuse b. A node asks this of every
// request its agents receive, most of which are not sub-tasks, and a JSON
// decode of each payload to find out cost microseconds per request.
//
// A Task needs a "swarmId" key. encoding/json matches keys
// case-insensitively, folding also U+017F (long s) to s and U+212A (Kelvin
// sign) to k, and a key may spell any letter as a \u escape; "warmid"
// has neither s nor k, so without a \u escape in b, a key that decodes to
// swarmId shows "warmid" in some ASCII case.
func MayBeTask(b []byte) bool {
	return maybeObject(b) && (hasUnicodeEscape(b) || containsFoldASCII(b, "warmid"))
}

// MayBeNotice is [MayBeTask] for [DecodeNotice]: a swarm notice's kind
// starts with "swarm-", which shows in b as `"swarm-` unless escaped.
func MayBeNotice(b []byte) bool {
	return maybeObject(b) && (hasUnicodeEscape(b) || bytes.Contains(b, []byte(`"swarm-`)))
}

// probe refuses b as decodeObject would (too large, not an object) or,
// when the probe said no, with notIt, before anything is allocated.
func probe(b []byte, maybe bool, notIt error) error {
	switch {
	case maybe:
		return nil
	case len(b) > MaxPayloadSize || !maybeObject(b):
		return decodeObject(b, nil)
	}
	return notIt
}

// maybeObject: b is a JSON object if anything (decodeObject's first check).
func maybeObject(b []byte) bool {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

func hasUnicodeEscape(b []byte) bool { return bytes.Contains(b, []byte(`\u`)) }

// containsFoldASCII reports whether b contains lower (lower-case ASCII
// letters) in any mix of ASCII cases. Candidates are found with
// bytes.IndexByte, once per case of the first letter.
func containsFoldASCII(b []byte, lower string) bool {
	for _, first := range []byte{lower[0], lower[0] - 'a' + 'A'} {
		for rest := b; ; {
			i := bytes.IndexByte(rest, first)
			if i < 0 || len(rest)-i < len(lower) {
				break
			}
			if equalFoldASCII(rest[i+1:i+len(lower)], lower[1:]) {
				return true
			}
			rest = rest[i+1:]
		}
	}
	return false
}

// equalFoldASCII: b equals lower (lower-case ASCII letters) in any case.
func equalFoldASCII(b []byte, lower string) bool {
	for j := range len(lower) {
		if b[j]|0x20 != lower[j] {
			return false
		}
	}
	return true
}

func decodeObject(b []byte, v any) error {
	if len(b) > MaxPayloadSize {
		return invalid("", "%d bytes, over the %d-byte limit", len(b), MaxPayloadSize)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errNotObject
	}
	if err := json.Unmarshal(b, v); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return &InvalidError{Field: field, Reason: "malformed: " + wirecodec.Truncate(err.Error(), 200)}
	}
	return nil
}

// checkID: 1..MaxIDLen bytes of printable ASCII without spaces
// (envelope.CheckID), so that a swarm id can serve as a correlation thread.
func checkID(field, s string) error {
	if err := envelope.CheckID(s, MaxIDLen); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}

// checkText: non-blank UTF-8 without control characters but tab, newline
// and carriage return (envelope.CheckText).
func checkText(field, s string, limit int) error {
	if strings.TrimSpace(s) == "" {
		return invalid(field, "must not be empty")
	}
	if err := envelope.CheckText(s, limit, true); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}

// checkAgent: an agent address, as in an envelope's sender and recipient:
// no control characters at all (envelope.CheckText), and no leading or
// trailing white space.
func checkAgent(field, s string) error {
	if s == "" || strings.TrimSpace(s) != s {
		return invalid(field, "must be an agent name or name@peerID, got %s", wirecodec.Quote(s))
	}
	if err := envelope.CheckText(s, negotiation.MaxAgentLen, false); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}

func checkCaps(field string, caps []string) error {
	if len(caps) > MaxCapabilities {
		return invalid(field, "%d entries, over the limit of %d", len(caps), MaxCapabilities)
	}
	for i, c := range caps {
		if err := agentcard.CheckCapabilityID(c); err != nil {
			return invalid(field+"["+strconv.Itoa(i)+"]", "%s", err.Error())
		}
		for j := range i {
			if caps[j] == c {
				return invalid(field+"["+strconv.Itoa(i)+"]", "duplicates %s[%d]", field, j)
			}
		}
	}
	return nil
}
