package mcpbridge

// The stdio side of `nova-node mcp`: an MCP client speaks newline-delimited
// JSON-RPC on stdin and stdout, and RelayStdio carries it to and from the
// node's MCP endpoint.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDrainTimeout bounds how long RelayStdio waits, once stdin closed,
// for the answers to the requests it relayed (`nova-node mcp
// --drain-timeout`).
const DefaultDrainTimeout = 30 * time.Second

// ErrDrainTimeout: stdin closed and answers were still due when the drain
// timeout ran out.
var ErrDrainTimeout = errors.New("answers still due when the drain timeout ran out")

// RelayStdio copies newline-delimited JSON-RPC from in to conn and from
// conn to out until either side ends. When in ends (stdin closed), it waits for the
// answers to the requests already relayed before it closes conn, so that
// `echo REQUEST | nova-node mcp` prints the answer; it waits at most drain
// (no bound if drain <= 0), then says on stderr which ids went unanswered
// and returns ErrDrainTimeout. Ids are matched by value (2.0 answers 2,
// "\u0061" answers "a"); a request the client cancelled
// (notifications/cancelled) is not waited for, and an error answer whose id
// is null (one the server could not attribute) stands for one of the
// requests still due. A line of in that is not JSON gets a JSON-RPC parse
// error (-32700, id null) on out, as JSON-RPC 2.0 asks of a server, and is
// not relayed: the SDK's transport would end the session on it without a
// word.
//
// The goroutine copying from conn ends when conn is closed, and RelayStdio
// waits for it. The one reading in cannot be interrupted (a read of stdin
// blocks until input or EOF): if RelayStdio returns first (conn ended, ctx
// cancelled), that goroutine ends at in's next line or EOF, when its write
// to the closed conn fails; its owner is the process, which exits.
func RelayStdio(ctx context.Context, in io.Reader, out io.Writer, conn io.ReadWriteCloser, drain time.Duration, stderr io.Writer) error {
	var mu sync.Mutex            // out, and the ids waiting for an answer
	waiting := map[string]bool{} // idKey of each request due an answer
	unattributed := 0            // error answers with a null id
	inDone := false
	drained := make(chan struct{}) // closed when in ended and nothing waits
	var once sync.Once
	checkDrained := func() { // with mu held
		if inDone && len(waiting) <= unattributed {
			once.Do(func() { close(drained) })
		}
	}
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := out.Write(b)
		return err
	}
	fromIn, toOut := make(chan error, 1), make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if t := bytes.TrimSpace(line); len(t) > 0 {
				if !json.Valid(t) {
					if werr := write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}` + "\n")); werr != nil {
						fromIn <- werr
						return
					}
				} else {
					mu.Lock()
					for _, m := range rpcMessages(t) {
						switch {
						case m.isRequest():
							waiting[m.key] = true
						case m.cancels != "":
							delete(waiting, m.cancels) // the server will not answer it
						}
					}
					mu.Unlock()
					if _, werr := conn.Write(append(t, '\n')); werr != nil {
						fromIn <- werr
						return
					}
				}
			}
			if err != nil {
				mu.Lock()
				inDone = true
				checkDrained()
				mu.Unlock()
				fromIn <- err
				return
			}
		}
	}()
	go func() {
		r := bufio.NewReaderSize(conn, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				mu.Lock()
				_, werr := out.Write(line)
				for _, m := range rpcMessages(bytes.TrimSpace(line)) {
					switch {
					case m.hasMethod:
					case m.key != "":
						delete(waiting, m.key)
					case m.isError:
						unattributed++
					}
				}
				checkDrained()
				mu.Unlock()
				if werr != nil {
					toOut <- werr
					return
				}
			}
			if err != nil {
				toOut <- err
				return
			}
		}
	}()
	var err error
	select {
	case err = <-fromIn:
		if errors.Is(err, io.EOF) {
			// stdin ended: the answers still due come first.
			var timeout <-chan time.Time
			if drain > 0 {
				t := time.NewTimer(drain)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-drained:
			case err = <-toOut:
				toOut <- err
			case <-ctx.Done():
			case <-timeout:
				mu.Lock()
				due := make([]string, 0, len(waiting))
				for k := range waiting {
					due = append(due, idText(k))
				}
				mu.Unlock()
				sort.Strings(due)
				fmt.Fprintf(stderr, "nova-node mcp: stdin closed, and after %v %d answer(s) had not come (id %s); giving up\n",
					drain, len(due), strings.Join(due, ", "))
				err = ErrDrainTimeout
			}
		}
	case err = <-toOut:
		toOut <- err
	case <-ctx.Done():
	}
	conn.Close() // ends the copy from conn
	<-toOut
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// rpcMessage is what relay needs of one JSON-RPC message.
type rpcMessage struct {
	key       string // idKey of its id; "" for none or null
	hasMethod bool   // a request or a notification
	isError   bool   // a response with an error member
	cancels   string // notifications/cancelled: idKey of the request cancelled
}

func (m rpcMessage) isRequest() bool { return m.hasMethod && m.key != "" }

// rpcMessages decodes the messages of line (one message or a batch); what
// is not a JSON object is left out.
func rpcMessages(line []byte) []rpcMessage {
	var raws []json.RawMessage
	if len(line) > 0 && line[0] == '[' {
		if json.Unmarshal(line, &raws) != nil {
			return nil
		}
	} else {
		raws = []json.RawMessage{line}
	}
	var msgs []rpcMessage
	for _, raw := range raws {
		var w struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
			Error  json.RawMessage `json:"error"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw, &w) != nil {
			continue
		}
		m := rpcMessage{key: idKey(w.ID), hasMethod: len(w.Method) > 0 && string(w.Method) != "null",
			isError: len(w.Error) > 0 && string(w.Error) != "null"}
		var method string
		if m.hasMethod && json.Unmarshal(w.Method, &method) == nil && method == "notifications/cancelled" && m.key == "" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(w.Params, &p) == nil {
				m.cancels = idKey(p.RequestID)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// idKey is a JSON-RPC id as relay compares it: by value, so that the text
// a server writes back need not be the client's byte for byte. A string is
// "s:" and its decoded value; a number "n:" and its exact value in a
// canonical form (2, 2.0, 20e-1 and 2E0 are one id; big numbers are kept
// whole, not rounded to a float64); anything else (not a legal id) is "j:"
// and its compact JSON. Null or absent: "".
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	case c == '-' || c >= '0' && c <= '9':
		if n, ok := canonNumber(string(raw)); ok {
			return "n:" + n
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "j:" + string(raw)
	}
	return "j:" + b.String()
}

// idText is an idKey as JSON text again, for messages.
func idText(key string) string {
	switch {
	case strings.HasPrefix(key, "s:"):
		b, _ := json.Marshal(key[2:])
		return string(b)
	case strings.HasPrefix(key, "n:"):
		d, e, _ := strings.Cut(key[2:], "e")
		if e == "0" {
			return d
		}
		return key[2:]
	}
	return strings.TrimPrefix(key, "j:")
}

// canonNumber writes the JSON number s exactly, as its significant digits
// (no leading or trailing zeros), "e" and a decimal exponent: "2.50" and
// "25e-1" are "25e-1", "-0.0" is "0e0". It does no arithmetic on the value,
// so no number is too big or too precise for it.
func canonNumber(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if hasExp {
		var err error
		if exp, err = strconv.ParseInt(strings.TrimPrefix(expText, "+"), 10, 64); err != nil {
			return "", false
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	if exp > 1<<40 || exp < -1<<40 { // keeps the sums below from wrapping
		return "", false
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0e0", true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if neg {
		trimmed = "-" + trimmed
	}
	return trimmed + "e" + strconv.FormatInt(exp, 10), true
}

// mcpSession connects an MCP client to the node's aggregated face.
