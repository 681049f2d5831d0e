package a2ahttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

// BenchmarkGatewaySend splits the cost of a blocking message/send on a fake
// mesh whose agent answers at once: with the task store fsyncing every
// transaction (as the node runs it), with fsync off (what the rest of the
// gateway costs), and one fsynced task save alone (a send makes four:
// submitted, working, the artifact, completed).
//
//	go test -run '^$' -bench BenchmarkGatewaySend -benchtime 300x ./protocol/a2ahttp/
func BenchmarkGatewaySend(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		name := "fsync"
		if noSync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "a2a.db"), 0o600, &bbolt.Options{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			cfg := a2ahttp.DefaultConfig()
			cfg.DB = db
			gw, err := a2ahttp.New(a2ahttptest.DemoMesh(time.Millisecond), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := gw.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(gw)
			defer func() { srv.Close(); _ = gw.Close() }()
			url := srv.URL + "/a2a/echo/"
			for i := 0; b.Loop(); i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m%d","role":"user","parts":[{"kind":"text","text":"q"}]}}}`, i, i)
				resp, err := http.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(out), `"completed"`) {
					b.Fatalf("%s", out)
				}
			}
		})
	}
	b.Run("one-fsynced-save", func(b *testing.B) {
		db, err := bbolt.Open(filepath.Join(b.TempDir(), "a2a.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		val := []byte(strings.Repeat("x", 600)) // about one stored task
		for i := 0; b.Loop(); i++ {
			if err := db.Update(func(tx *bbolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("t"))
				if err != nil {
					return err
				}
				return bk.Put(fmt.Appendf(nil, "k%d", i), val)
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
