//go:build ignore

// Command refserver is a throwaway reference MCP server built on the official
// Go SDK (github.com/modelcontextprotocol/go-sdk v1.8.0). It exists only to
// develop and self-test the interop harness in mcpbridge/interop without a
// running nova-node: it mirrors the shape of the node's MCP aggregate face
// (wire names like "echo_say" with canonical title "echo.say", a nova://
// resource and a prompt) and the node's HTTP routing (2026-07-28+ requests to a
// Stateless handler, everything else to a stateful one with SessionTimeout).
//
// The build tag keeps it out of the nova-node module's `go build ./...` and
// `go test ./...` (it also lives under testdata/). Naming the file on the
// command line overrides the tag; build it in a scratch module outside the
// repo (selftest.sh does exactly this):
//
//	mkdir -p /tmp/refserver && cp main.go /tmp/refserver/ && cd /tmp/refserver
//	go mod init refserver && go get github.com/modelcontextprotocol/go-sdk/mcp@v1.8.0
//	go build -o refserver main.go
//	./refserver                                   # stdio (NDJSON on stdin/stdout)
//	./refserver -http 127.0.0.1:0 -url-file url   # streamable HTTP; URL on stderr and in ./url
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessMinVersion is the first protocol version served by the stateless
// (sessionless, SEP-2567) handler; the go-sdk accepts 2026-07-28 requests only
// on a Stateless handler.
const statelessMinVersion = "2026-07-28"

var (
	httpAddr = flag.String("http", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:0) instead of stdio")
	urlFile  = flag.String("url-file", "", "with -http: also write the endpoint URL to this file once listening")
	idle     = flag.Duration("session-timeout", 5*time.Minute, "idle timeout of stateful HTTP sessions")
)

type sayArgs struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "nova-node-refserver", Title: "nova-node interop reference server", Version: "0.0.1"}, nil)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo_say",
		Title:       "echo.say",
		Description: "Echo the given text back (reference tool for the interop harness).",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in sayArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})

	const readme = "# nova-node reference server\n\nThis resource is served by the interop reference server.\n"
	s.AddResource(&mcp.Resource{
		URI:         "nova://test/readme",
		Name:        "test_readme",
		Title:       "test.readme",
		Description: "A static markdown document.",
		MIMEType:    "text/markdown",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "text/markdown", Text: readme,
		}}}, nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Title:       "greet",
		Description: "Greet someone by name.",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		return &mcp.GetPromptResult{
			Description: "A greeting",
			Messages: []*mcp.PromptMessage{{
				Role:    "user",
				Content: &mcp.TextContent{Text: fmt.Sprintf("Hello, %s!", name)},
			}},
		}, nil
	})
	return s
}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	server := newServer()

	if *httpAddr == "" {
		if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Fatalf("stdio server: %v", err)
		}
		return
	}

	getServer := func(*http.Request) *mcp.Server { return server }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{SessionTimeout: *idle})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		// Plain string comparison is correct for YYYY-MM-DD versions; an absent
		// header ("") sorts before every version and goes to the stateful side.
		if r.Header.Get("Mcp-Protocol-Version") >= statelessMinVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})

	host, _, err := net.SplitHostPort(*httpAddr)
	if err != nil {
		log.Fatalf("bad -http address: %v", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("refusing to listen on non-loopback address %q", *httpAddr)
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	url := fmt.Sprintf("http://%s/mcp", ln.Addr())
	if *urlFile != "" {
		if err := os.WriteFile(*urlFile, []byte(url+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Fprintf(os.Stderr, "refserver listening on %s\n", url)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = hs.Shutdown(context.Background()) }()
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
