package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// rwc is a byte stream for a lineConn: reads from r, writes to w.
type rwc struct {
	io.Reader
	w bytes.Buffer
}

func (c *rwc) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *rwc) Close() error                { return nil }

// FuzzLineConn feeds arbitrary bytes, as a peer node sends them on a
// /nova/mcp/1.0.0 stream, to nova's line codec (lineConn, decodeLine) and
// to what the hosting node decodes of a tools/call and a cancellation
// itself (hostedCall, hostCalls.cancel). None may panic; every message
// read re-encodes to one that decodes the same; a response goes to the
// call waiting for its id and to no other; a cancellation cancels only
// the call it names.
//
//	go test -run '^$' -fuzz FuzzLineConn -fuzztime 30s ./mcpbridge/
func FuzzLineConn(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"n1","method":"tools/call","params":{"name":"files.read","arguments":{"path":"x"},"_meta":{"nova/caller":"a@p","nova/call":"nova-1","progressToken":"nova-1"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files.read","_meta":{"nova/caller":1,"progressToken":3}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"n1"}}`,
		`{"jsonrpc":"2.0","id":"n1","result":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","id":"n2","error":{"code":-31007,"message":"TOOL_NOT_FOUND: x","data":{"code":"TOOL_NOT_FOUND"}}}`,
		`{"jsonrpc":"2.0","id":2e0,"method":"ping"}` + "\r\n\n" + `{"jsonrpc":"2.0","id":null,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		"", "\n\n", "{", "null", `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var inflight hostCalls
		ctx7, cancel7 := context.WithCancel(context.Background())
		defer cancel7()
		id7, _ := jsonrpc.MakeID(float64(7))
		inflight.add(id7, cancel7)
		var hosted int
		c := newLineConn(&rwc{Reader: bytes.NewReader(data)})
		c.hosted = func(r *jsonrpc.Request) bool {
			if r.Method == "notifications/cancelled" {
				return !r.IsCall() && inflight.cancel(r.Params)
			}
			if r.Method != "tools/call" || !r.IsCall() {
				return false
			}
			var hc hostedCall
			_ = json.Unmarshal(r.Params, &hc)
			hosted++
			return true
		}
		n1 := make(chan *jsonrpc.Response, 1)
		c.waiting["n1"] = n1
		for range bytes.Count(data, []byte("\n")) + 2 {
			m, err := c.Read(context.Background())
			if err != nil {
				break
			}
			if r, ok := m.(*jsonrpc.Request); ok && r.Method == "" {
				continue // the go-sdk's encoder leaves an empty method out
			}
			line, err := jsonrpc.EncodeMessage(m)
			if err != nil {
				t.Fatalf("message read does not encode: %+v: %v", m, err)
			}
			again, err := decodeLine(line)
			if err != nil {
				t.Fatalf("%s: re-encoded message does not decode: %v", line, err)
			}
			if l2, _ := jsonrpc.EncodeMessage(again); !bytes.Equal(l2, line) {
				t.Fatalf("round trip changed the message:\n%s\n%s", line, l2)
			}
			if r, ok := m.(*jsonrpc.Response); ok && r.ID.Raw() == "n1" {
				t.Fatalf("the answer of a waiting call went to the session: %s", line)
			}
		}
		select {
		case r := <-n1:
			if r.ID.Raw() != "n1" {
				t.Fatalf("call n1 got the answer of %v", r.ID)
			}
		default:
		}
		if ctx7.Err() != nil && !bytes.Contains(data, []byte("7")) {
			t.Fatal("a cancellation that does not name call 7 cancelled it")
		}
	})
}
