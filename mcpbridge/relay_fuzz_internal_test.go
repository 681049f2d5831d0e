package mcpbridge

import (
	"bytes"
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzRelayLine feeds arbitrary bytes, as a backend sends them on a stdio
// pipe, to what decodes them: the JSON-RPC line codec under its session
// (lineConn, with a line cap), the relay of the progress
// notifications and log messages it reads to the calls in flight
// (notifyConn, calls.dispatch) and of the resource updates it reads
// (updatedURI), and the message scan of `nova-node mcp`'s stdio relay
// (rpcMessages). None may panic, and a notification only ever reaches a
// call tracked on the connection it came on.
//
//	go test -run '^$' -fuzz FuzzRelayLine -fuzztime 30s ./mcpbridge/
func FuzzRelayLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nova-1","progress":1,"total":2,"message":"step 1"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"files","data":"x","_meta":{"nova/call":"nova-1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"deep":[1,2,3]},"_meta":{"nova/call":"nova-2"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"a","error":{"code":-31007,"message":"TOOL_NOT_FOUND: x","data":{"code":"TOOL_NOT_FOUND"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read"}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"nova://x"}}`,
		`{"jsonrpc":"2.0","id":2e0,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":{"a":1},"progress":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":null}` + "\n" + `{"jsonrpc":"2.0","id":12345678901234567890,"result":{}}`,
		"", "\n\n", "{", "[", "[]", "null", `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range rpcMessages(data) {
			if m.isRequest() && m.key == "" {
				t.Fatalf("request without an id key: %+v", m)
			}
		}

		var c calls
		mine, other := &link{}, &link{}
		var got int
		r := &relay{progress: func(*mcp.ProgressNotificationParams) { got++ }, log: func(*mcp.LoggingMessageParams) { got++ }}
		_, done := c.add(mine, r) // nova-1, on this connection
		defer done()
		_, doneOther := c.add(other, &relay{
			progress: func(*mcp.ProgressNotificationParams) { t.Fatal("progress reached a call on another connection") },
			log:      func(*mcp.LoggingMessageParams) { t.Fatal("log message reached a call on another connection") },
		}) // nova-2, on another connection
		defer doneOther()
		onLog := func(ln *link, p *mcp.LoggingMessageParams) {
			if rl := c.get(ln, p.Meta[metaCall]); rl != nil {
				rl.log(p)
			}
		}
		lc := newLineConn(&rwc{Reader: bytes.NewReader(data)})
		lc.max = 1 << 16
		tr := notifyTransport{lineTransport{lc}, mine, func(ln *link, r *jsonrpc.Request) {
			if r.Method == methodResourceUpdated {
				_ = updatedURI(r)
				return
			}
			c.dispatch(ln, r, onLog)
		}}
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for range bytes.Count(data, []byte("\n")) + 2 {
			// The first error (a malformed line, the end) ends the
			// connection, as it ends a session.
			if _, err := conn.Read(context.Background()); err != nil {
				break
			}
		}
		if got > len(data) {
			t.Fatalf("%d notifications relayed from %d bytes", got, len(data))
		}
	})
}
