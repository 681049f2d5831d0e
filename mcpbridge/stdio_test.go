package mcpbridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeMCPServer is the far side of relay's conn: it answers each request
// the way the MCP SDK does (a numeric id decoded as a float64 and written
// back as an int64, a string id decoded and re-encoded), except that method
// "stuck" is never answered and method "unattributable" gets an error
// whose id is null.
type fakeMCPServer struct {
	io.Reader // what the server writes
	io.Writer // what the relay writes
	closeFn   func()
}

func (f *fakeMCPServer) Close() error { f.closeFn(); return nil }

func newFakeMCPServer(t *testing.T) *fakeMCPServer {
	t.Helper()
	toSrvR, toSrvW := io.Pipe()
	fromSrvR, fromSrvW := io.Pipe()
	go func() {
		r := bufio.NewReader(toSrvR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				fromSrvW.Close()
				return
			}
			var m struct {
				ID     any    `json:"id"`
				Method string `json:"method"`
			}
			if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method == "stuck" || strings.HasPrefix(m.Method, "notifications/") {
				continue
			}
			var answer string
			if m.Method == "unattributable" {
				answer = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}`
			} else {
				if f, ok := m.ID.(float64); ok {
					m.ID = int64(f)
				}
				id, _ := json.Marshal(m.ID)
				answer = `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`
			}
			if _, err := fromSrvW.Write([]byte(answer + "\n")); err != nil {
				return
			}
		}
	}()
	return &fakeMCPServer{Reader: fromSrvR, Writer: toSrvW, closeFn: func() {
		toSrvW.Close()
		fromSrvR.Close()
	}}
}

// runRelay relays in to a fake server and fails the test if relay has not
// returned within 10 s (the hang this guards against).
func runRelay(t *testing.T, in string, drain time.Duration) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- RelayStdio(t.Context(), strings.NewReader(in), &o, newFakeMCPServer(t), drain, &e) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("relay still waiting 10s after stdin closed on %q", in)
	}
	return o.String(), e.String(), err
}

// TestMCPRelayMatchesIDsByValue: after stdin closes, relay waits for
// answers whose ids the server writes back differently from the client
// (2.0 as 2, "\u0061" as "a", 1E1 as 10), and returns once they came;
// with no drain bound, ids compared as text waited forever.
func TestMCPRelayMatchesIDsByValue(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":2.0,"method":"ping"}
{"jsonrpc":"2.0","id":"\u0061","method":"ping"}
{"jsonrpc":"2.0","id":1E1,"method":"ping"}
{"jsonrpc":"2.0","id":-0.0,"method":"ping"}
`
	out, errOut, err := runRelay(t, in, 0)
	if err != nil || errOut != "" {
		t.Fatalf("relay: %v, stderr %q", err, errOut)
	}
	for _, want := range []string{`"id":2,`, `"id":"a",`, `"id":10,`, `"id":0,`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
}

// TestMCPRelayNullIDErrorEndsDrain: an error answer with "id": null (one
// the server could not attribute) stands for the request still due.
func TestMCPRelayNullIDErrorEndsDrain(t *testing.T) {
	out, errOut, err := runRelay(t, `{"jsonrpc":"2.0","id":7,"method":"unattributable"}`+"\n", 0)
	if err != nil || errOut != "" || !strings.Contains(out, `"id":null`) {
		t.Fatalf("relay: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// TestMCPRelayCancelledNotWaitedFor: a request the client cancelled gets
// no answer (MCP says so), and relay does not wait for one.
func TestMCPRelayCancelledNotWaitedFor(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":3,"method":"stuck"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3.0,"reason":"bored"}}
`
	if out, errOut, err := runRelay(t, in, 0); err != nil || errOut != "" {
		t.Fatalf("relay: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// TestMCPRelayDrainTimeout: a request never answered (a stuck tool call, or
// an id the server mangled) holds relay no longer than the drain timeout;
// it then names the ids on stderr, writes nothing on stdout but the
// answers, and returns ErrDrainTimeout (exit 1).
func TestMCPRelayDrainTimeout(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"ping"}
{"jsonrpc":"2.0","id":"slow","method":"stuck"}
{"jsonrpc":"2.0","id":123456789012345678901234,"method":"ping"}
`
	start := time.Now()
	out, errOut, err := runRelay(t, in, 300*time.Millisecond)
	if !errors.Is(err, ErrDrainTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("relay: %v after %v; want ErrDrainTimeout after ~300ms", err, time.Since(start))
	}
	if !strings.Contains(errOut, `"slow"`) || !strings.Contains(errOut, "123456789012345678901234") || strings.Contains(errOut, "id 1,") {
		t.Errorf("stderr should name the ids still due: %q", errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("stdout line is not JSON: %q", line)
		}
	}
	if !strings.Contains(out, `"id":1,`) {
		t.Errorf("the answer that came is missing: %q", out)
	}
}

func TestMCPIDKey(t *testing.T) {
	same := [][]string{
		{`2`, `2.0`, `20e-1`, `2E0`, `0.2e+1`, `002`},
		{`"a"`, `"\u0061"`},
		{`0`, `-0`, `0.000`, `0e5`},
		{`123456789012345678901234`, `1.23456789012345678901234e23`},
		{`-1.5`, `-15e-1`},
	}
	for _, ids := range same {
		for _, id := range ids[1:] {
			if a, b := idKey(json.RawMessage(ids[0])), idKey(json.RawMessage(id)); a != b || a == "" {
				t.Errorf("idKey(%s) = %q, idKey(%s) = %q; want equal", ids[0], a, id, b)
			}
		}
	}
	differ := [][2]string{{`2`, `"2"`}, {`123456789012345678901234`, `123456789012345678901235`}, {`1`, `-1`}, {`1.5`, `1`}}
	for _, p := range differ {
		if idKey(json.RawMessage(p[0])) == idKey(json.RawMessage(p[1])) {
			t.Errorf("idKey(%s) == idKey(%s)", p[0], p[1])
		}
	}
	if idKey(json.RawMessage(`null`)) != "" || idKey(nil) != "" {
		t.Error("a null id has no key")
	}
	if k := idKey(json.RawMessage(`1e99999999999999999999`)); k == "" {
		t.Error("an absurd exponent still gets a key")
	}
}
