package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/mcpbridge"
)

func okHandler(context.Context, json.RawMessage) (mcpbridge.Result, error) {
	return mcpbridge.Result{Content: json.RawMessage(`"ok"`)}, nil
}

func TestErrorCodes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		run      func(r *mcpbridge.Registry) error
		sentinel error
		code     string
		mention  string
	}{
		{"duplicate tool", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "build"}, okHandler)
		}, mcpbridge.ErrDuplicateTool, mcpbridge.CodeDuplicateTool, "mars.build"},
		{"resource not found", func(r *mcpbridge.Registry) error {
			_, err := r.ReadResource(ctx, "nova://nowhere")
			return err
		}, mcpbridge.ErrResourceNotFound, mcpbridge.CodeResourceNotFound, "nova://nowhere"},
		{"input schema not JSON", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x", InputSchema: json.RawMessage(`{`)}, okHandler)
		}, mcpbridge.ErrInvalidSchema, mcpbridge.CodeInvalidSchema, "inputSchema"},
		{"input schema not object", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x", InputSchema: json.RawMessage(`[1]`)}, okHandler)
		}, mcpbridge.ErrInvalidSchema, mcpbridge.CodeInvalidSchema, "inputSchema"},
		{"input schema wrong type", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}, okHandler)
		}, mcpbridge.ErrInvalidSchema, mcpbridge.CodeInvalidSchema, "type"},
		{"input schema bad properties", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":3}}`)}, okHandler)
		}, mcpbridge.ErrInvalidSchema, mcpbridge.CodeInvalidSchema, `"a"`},
		{"output schema null", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x", OutputSchema: json.RawMessage(`null`)}, okHandler)
		}, mcpbridge.ErrInvalidSchema, mcpbridge.CodeInvalidSchema, "outputSchema"},
		{"missing prompt argument", func(r *mcpbridge.Registry) error {
			_, err := r.GetPrompt("mars.greet", map[string]string{"tone": "dry"})
			return err
		}, mcpbridge.ErrMissingArgument, mcpbridge.CodeMissingArgument, "who"},
		{"prompt not found", func(r *mcpbridge.Registry) error {
			_, err := r.GetPrompt("mars.nope", nil)
			return err
		}, mcpbridge.ErrPromptNotFound, mcpbridge.CodePromptNotFound, "mars.nope"},
		{"tool not found", func(r *mcpbridge.Registry) error {
			_, err := r.CallTool(ctx, "mars_nope", nil)
			return err
		}, mcpbridge.ErrToolNotFound, mcpbridge.CodeToolNotFound, "mars_nope"},
		{"arguments not an object", func(r *mcpbridge.Registry) error {
			_, err := r.CallTool(ctx, "mars.build", json.RawMessage(`[]`))
			return err
		}, mcpbridge.ErrInvalidArguments, mcpbridge.CodeInvalidArguments, "mars.build"},
		{"dotted agent", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "a.b", Name: "x"}, okHandler)
		}, mcpbridge.ErrInvalidName, mcpbridge.CodeInvalidName, "a.b"},
		{"nil handler", func(r *mcpbridge.Registry) error {
			return r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "x"}, nil)
		}, mcpbridge.ErrInvalidDefinition, mcpbridge.CodeInvalidDefinition, "mars.x"},
		{"duplicate resource", func(r *mcpbridge.Registry) error {
			return r.RegisterResource(mcpbridge.Resource{URI: "nova://rules", Name: "rules", Agent: "mars"}, func(context.Context) ([]byte, error) { return nil, nil })
		}, mcpbridge.ErrDuplicateResource, mcpbridge.CodeDuplicateResource, "nova://rules"},
		{"resource without scheme", func(r *mcpbridge.Registry) error {
			return r.RegisterResource(mcpbridge.Resource{URI: "rules", Name: "rules", Agent: "mars"}, func(context.Context) ([]byte, error) { return nil, nil })
		}, mcpbridge.ErrInvalidDefinition, mcpbridge.CodeInvalidDefinition, "scheme"},
		{"resource loader fails", func(r *mcpbridge.Registry) error {
			_, err := r.ReadResource(ctx, "nova://broken")
			return err
		}, mcpbridge.ErrResourceReadFailed, mcpbridge.CodeResourceReadFailed, "mars"},
		{"duplicate prompt", func(r *mcpbridge.Registry) error {
			return r.RegisterPrompt(mcpbridge.Prompt{Agent: "mars", Name: "greet"})
		}, mcpbridge.ErrDuplicatePrompt, mcpbridge.CodeDuplicatePrompt, "mars.greet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mcpbridge.NewRegistry()
			if err := r.RegisterTool(mcpbridge.Tool{Agent: "mars", Name: "build"}, okHandler); err != nil {
				t.Fatal(err)
			}
			if err := r.RegisterResource(mcpbridge.Resource{URI: "nova://rules", Name: "rules", Agent: "mars"}, func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			if err := r.RegisterResource(mcpbridge.Resource{URI: "nova://broken", Name: "broken", Agent: "mars"}, func(context.Context) ([]byte, error) { panic("disk gone") }); err != nil {
				t.Fatal(err)
			}
			if err := r.RegisterPrompt(mcpbridge.Prompt{Agent: "mars", Name: "greet", Template: "Hi {{who}}",
				Arguments: []mcpbridge.PromptArg{{Name: "who", Required: true}, {Name: "tone"}}}); err != nil {
				t.Fatal(err)
			}
			err := tt.run(r)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.sentinel)
			}
			var c mcpbridge.Coded
			if !errors.As(err, &c) || c.Code() != tt.code {
				t.Errorf("code of %v: want %s", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("%q does not mention %q", err, tt.mention)
			}
		})
	}
}

func TestHandlerFailureIsResult(t *testing.T) {
	r := mcpbridge.NewRegistry()
	calls := 0
	_ = r.RegisterTool(mcpbridge.Tool{Agent: "pluto", Name: "fail"}, func(context.Context, json.RawMessage) (mcpbridge.Result, error) {
		calls++
		return mcpbridge.Result{}, &mcpbridge.ToolError{ErrCode: "BACKEND_DOWN", Message: "gone"}
	})
	_ = r.RegisterTool(mcpbridge.Tool{Agent: "pluto", Name: "panic"}, func(context.Context, json.RawMessage) (mcpbridge.Result, error) {
		panic("bad backend")
	})
	_ = r.RegisterTool(mcpbridge.Tool{Agent: "pluto", Name: "iserr"}, func(context.Context, json.RawMessage) (mcpbridge.Result, error) {
		return mcpbridge.Result{Content: json.RawMessage(`"no"`), IsError: true}, nil
	})
	for name, code := range map[string]string{"pluto.fail": "BACKEND_DOWN", "pluto_panic": mcpbridge.CodeToolFailed, "pluto.iserr": mcpbridge.CodeToolFailed} {
		res, err := r.CallTool(context.Background(), name, nil)
		if err != nil || !res.IsError || res.Error == nil || res.Error.Code() != code || res.Error.Agent != "pluto" {
			t.Errorf("%s: %v %+v", name, err, res)
		}
	}
	if calls != 1 {
		t.Errorf("handler called %d times: retried", calls)
	}
	if s := r.Metrics().Snapshot(); s.ErrorCount != 3 || s.TotalToolInvocations != 3 {
		t.Errorf("metrics %+v", s)
	}
}

func TestUnknownPlaceholderKept(t *testing.T) {
	got, err := mcpbridge.Render(mcpbridge.Prompt{Agent: "a", Name: "p", Template: "{{x}} {{ y }} {{z}}",
		Arguments: []mcpbridge.PromptArg{{Name: "x"}, {Name: "y"}}}, map[string]string{"x": "{{y}}", "z": "ignored"})
	if err != nil || got != "{{y}}  {{z}}" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		agent, tool string
		ok          bool
	}{
		{"venus", "search", true}, {"venus", "web.search", true}, {"a.b", "c", false},
		{"", "c", false}, {"a", "", false}, {"-a", "c", false}, {"a", "c d", false},
		{"a", strings.Repeat("t", 128), true}, {"a", strings.Repeat("t", 129), false},
	} {
		c, err := mcpbridge.Canonical(tc.agent, tc.tool)
		if (err == nil) != tc.ok {
			t.Errorf("Canonical(%q, %q) = %q, %v", tc.agent, tc.tool, c, err)
			continue
		}
		if tc.ok {
			a, tl, err := mcpbridge.SplitCanonical(c)
			if err != nil || a != tc.agent || tl != tc.tool {
				t.Errorf("SplitCanonical(%q) = %q, %q, %v", c, a, tl, err)
			}
		}
	}
	if _, _, err := mcpbridge.SplitCanonical("nodot"); err == nil {
		t.Error("SplitCanonical accepted a name without '.'")
	}
}
