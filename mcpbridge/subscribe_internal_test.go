package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A resource update that a stdio backend or a peer writes before a call's
// answer is taken (for the registry, for the face) before that answer
// reaches the caller, on the goroutine that reads the connection: the
// go-sdk would hand the answer over at once and the update later, from a
// queue of its handlers. Both kinds of call: a backend's (notifyConn.call)
// and a peer's tools/call (lineConn.call).
func TestUpdateTakenBeforeAnswer(t *testing.T) {
	for _, kind := range []string{"backend", "peer"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := net.Pipe()
				lc := newLineConn(a)
				var mu sync.Mutex
				var took []string
				conn, err := notifyTransport{lineTransport{lc}, &link{}, func(_ *link, r *jsonrpc.Request) {
					if r.Method == methodResourceUpdated {
						mu.Lock()
						took = append(took, updatedURI(r))
						mu.Unlock()
					}
				}}.Connect(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				wg.Go(func() { // the session's reader
					for {
						if _, err := conn.Read(context.Background()); err != nil {
							return
						}
					}
				})
				wg.Go(func() { // the server: an update, then the answer
					line, err := bufio.NewReader(b).ReadBytes('\n')
					if err != nil {
						return
					}
					var req struct{ ID string }
					_ = json.Unmarshal(line, &req)
					fmt.Fprintf(b, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"lab://doc"}}`+"\n")
					fmt.Fprintf(b, `{"jsonrpc":"2.0","id":%q,"result":{"content":[]}}`+"\n", req.ID)
				})
				if kind == "backend" {
					_, err = conn.(*notifyConn).call(t.Context(), "tools/call", json.RawMessage(`{"name":"touch"}`))
				} else {
					_, err = lc.call(t.Context(), "tools/call", []byte(`{"name":"lab.touch"}`))
				}
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				got := slices.Clone(took)
				mu.Unlock()
				if !slices.Equal(got, []string{"lab://doc"}) {
					t.Errorf("updates taken when the answer came: %q, want the one sent before it", got)
				}
				_ = conn.Close()
				_ = b.Close()
				wg.Wait()
			})
		})
	}
}
