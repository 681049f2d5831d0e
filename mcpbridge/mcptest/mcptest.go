// Package mcptest is a small MCP server for tests, benchmarks and demos:
// tools say, add, fail, divide, big, steps, touch, ask and crash, a resource
// (which may be subscribed to: touch reports it updated), a resource
// template and a prompt. A test binary
// serves it on stdio when started with NOVA_MCPTEST_SERVE=1 (call
// MaybeServe first thing in TestMain), so tests can declare it as a stdio
// backend with Command os.Args[0].
package mcptest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvServe makes MaybeServe serve on stdio and exit.
const EnvServe = "NOVA_MCPTEST_SERVE"

// ReadmeURI is the test server's resource.
const ReadmeURI = "nova://mcptest/readme"

// EchoTemplate is the test server's resource template: reading
// nova://mcptest/echo/WORD gives "echo: WORD".
const EchoTemplate = "nova://mcptest/echo/{word}"

type sayIn struct {
	Text string `json:"text" jsonschema:"the text to say back"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type divideOut struct {
	Quotient float64 `json:"quotient"`
}

type bigIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes of text to return"`
}

type bigOut struct {
	Text string `json:"text"`
}

type stepsIn struct {
	Steps int `json:"steps" jsonschema:"how many steps to report"`
}

type stepsOut struct {
	Done int `json:"done"`
}

// Server returns the test MCP server.
func Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, &mcp.ServerOptions{CompletionHandler: complete,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil }})
	mcp.AddTool(s, &mcp.Tool{Name: "say", Description: "Says the text back."}, func(ctx context.Context, req *mcp.CallToolRequest, in sayIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("this tool always fails")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "divide", Description: "Divides a by b; fails when b is 0. Declares an output schema."}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, divideOut, error) {
		if in.B == 0 {
			return nil, divideOut{}, fmt.Errorf("division by zero")
		}
		return nil, divideOut{Quotient: in.A / in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns that many bytes of text, as text and as structured content (like a file read)."}, func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, bigOut, error) {
		if in.Bytes < 0 || in.Bytes > 64<<20 {
			return nil, bigOut{}, fmt.Errorf("bytes must be between 0 and 64 MiB")
		}
		return nil, bigOut{Text: strings.Repeat("0123456789abcdef", in.Bytes/16+1)[:in.Bytes]}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "steps", Description: "Reports each step as progress (when the call has a progress token) and as an info log message."}, func(ctx context.Context, req *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, stepsOut, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= in.Steps; i++ {
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, stepsOut{}, err
				}
			}
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "mcptest", Data: fmt.Sprintf("step %d of %d", i, in.Steps)}); err != nil {
				return nil, stepsOut{}, err
			}
		}
		return nil, stepsOut{Done: in.Steps}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Reports the readme resource as updated to its subscribers."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: ReadmeURI})
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the client's model (sampling) and then its user (elicitation) about the text, and returns both answers."}, func(ctx context.Context, req *mcp.CallToolRequest, in sayIn) (*mcp.CallToolResult, any, error) {
		m, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("sampling: %w", err)
		}
		e, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Text, RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation: %w", err)
		}
		model := ""
		if t, ok := m.Content.(*mcp.TextContent); ok {
			model = t.Text
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("model: %s; user: %s %v", model, e.Action, e.Content["answer"])}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits until the call is cancelled (for cancellation tests)."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server process (for recovery tests)."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: ReadmeURI, Name: "readme", MIMEType: "text/markdown"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ReadmeURI, MIMEType: "text/markdown", Text: "# mcptest\nA test server.\n"}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: EchoTemplate, Name: "echo", MIMEType: "text/plain"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		word := strings.TrimPrefix(req.Params.URI, "nova://mcptest/echo/")
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "echo: " + word}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"] + "!"}}}}, nil
		})
	return s
}

// complete offers names for greet's argument "name" and words for the echo
// template's "word", those starting with the value typed so far.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var all []string
	switch {
	case req.Params.Ref.Type == "ref/prompt" && req.Params.Ref.Name == "greet" && req.Params.Argument.Name == "name":
		all = []string{"Ada", "Alan", "Grace"}
	case req.Params.Ref.Type == "ref/resource" && req.Params.Ref.URI == EchoTemplate && req.Params.Argument.Name == "word":
		all = []string{"hello", "help", "world"}
	}
	values := []string{}
	for _, v := range all {
		if strings.HasPrefix(v, req.Params.Argument.Value) {
			values = append(values, v)
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

// MaybeServe serves on stdio and exits when EnvServe is set: Server when
// it is "1", Conformance when it is [ServeConformance].
func MaybeServe() {
	var s *mcp.Server
	switch os.Getenv(EnvServe) {
	case "1":
		s = Server()
	case ServeConformance:
		s = Conformance()
	default:
		return
	}
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
