package a2ahttp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

// The main flow: a gateway in front of a mesh, mounted on an HTTP server,
// and the outbound client calling one of its agents.
func Example() {
	dir, _ := os.MkdirTemp("", "a2a-example")
	defer os.RemoveAll(dir)

	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = filepath.Join(dir, "nova.db") // the node passes its own *bbolt.DB as cfg.DB
	gw, err := a2ahttp.New(a2ahttptest.DemoMesh(0), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = gw.Start(context.Background())
	srv := httptest.NewServer(gw) // the node mounts gw at the root of its A2A listener
	defer func() { srv.Close(); _ = gw.Close() }()

	c := a2ahttp.NewClient()
	r := c.Send(context.Background(), srv.URL+"/a2a/echo/", a2ahttp.Message{Text: "hi"})
	fmt.Println(r.Success, r.State, r.ResponseText, r.Version)

	r = c.Send(context.Background(), srv.URL+"/a2a/ask/", a2ahttp.Message{Text: "hi"})
	fmt.Println(r.Code, r.Error)
	r = c.Send(context.Background(), srv.URL+"/a2a/ask/", a2ahttp.Message{Text: "Ada", TaskID: r.TaskID, ContextID: r.ContextID})
	fmt.Println(r.ResponseText)
	// Output:
	// true completed echo: hi 1.0
	// INPUT_REQUIRED What is your name?
	// Hello, Ada!
}
