package mcptest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeConformance is the value of EnvServe that makes MaybeServe serve
// Conformance instead of Server.
const ServeConformance = "conformance"

// redPixel is a 1x1 red PNG.
var redPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

// silence is a WAV file of 8 samples of silence (8 kHz, 8 bit, mono).
func silence() []byte {
	const samples = 8
	b := make([]byte, 0, 44+samples)
	le := binary.LittleEndian
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, 36+samples)
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16)
	b = le.AppendUint16(b, 1)    // PCM
	b = le.AppendUint16(b, 1)    // mono
	b = le.AppendUint32(b, 8000) // sample rate
	b = le.AppendUint32(b, 8000) // byte rate
	b = le.AppendUint16(b, 1)    // block align
	b = le.AppendUint16(b, 8)    // bits per sample
	b = append(b, "data"...)
	b = le.AppendUint32(b, samples)
	for range samples {
		b = append(b, 128)
	}
	return b
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// noArgs is the input schema of a tool without arguments.
var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

// Conformance returns a server with the fixtures that the MCP conformance
// suite's server scenarios call (@modelcontextprotocol/conformance 0.1.16:
// the tools test_simple_text ... json_schema_2020_12_tool, the resources
// test://static-text, test://static-binary and test://watched-resource,
// the template test://template/{id}/data, the prompts test_simple_prompt
// ... test_prompt_with_image, completion and subscriptions), as the
// suite's own reference server describes them, so that the suite can run
// against a node relaying them from another node.
func Conformance() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest-conformance", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			values := []string{}
			for _, v := range []string{"paris", "park", "party"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					values = append(values, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	tool := func(name, desc string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: noArgs}, h)
	}
	tool("test_simple_text", "Returns simple text.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("This is a simple text response for testing."), nil
	})
	tool("test_image_content", "Returns an image.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}}}, nil
	})
	tool("test_audio_content", "Returns audio.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silence(), MIMEType: "audio/wav"}}}, nil
	})
	tool("test_embedded_resource", "Returns an embedded resource.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}, nil
	})
	tool("test_multiple_content_types", "Returns text, an image and a resource.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
		}}, nil
	})
	tool("test_tool_with_logging", "Logs three messages while it runs.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond) // the suite checks messages spread over the call
			}
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformance", Data: msg}); err != nil {
				return nil, err
			}
		}
		return text("Tool with logging executed successfully"), nil
	})
	tool("test_error_handling", "Always fails.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil
	})
	tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100}); err != nil {
					return nil, err
				}
			}
		}
		return text("Tool with progress executed successfully"), nil
	})
	s.AddTool(&mcp.Tool{Name: "test_sampling", Description: "Asks the client's LLM.", InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Prompt string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, err
			}
			t, _ := res.Content.(*mcp.TextContent)
			if t == nil {
				return text("LLM response: "), nil
			}
			return text("LLM response: " + t.Text), nil
		})
	elicit := func(ctx context.Context, req *mcp.CallToolRequest, msg string, schema json.RawMessage, prefix string) (*mcp.CallToolResult, error) {
		var sch any
		_ = json.Unmarshal(schema, &sch)
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: msg, RequestedSchema: sch})
		if err != nil {
			return nil, err
		}
		content, _ := json.Marshal(res.Content)
		return text(fmt.Sprintf("%saction=%s, content=%s", prefix, res.Action, content)), nil
	}
	s.AddTool(&mcp.Tool{Name: "test_elicitation", Description: "Asks the user.", InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Message string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return elicit(ctx, req, in.Message, json.RawMessage(`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`), "User response: ")
		})
	tool("test_elicitation_sep1034_defaults", "Asks the user, with defaults.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return elicit(ctx, req, "Please review and update the form fields with defaults", json.RawMessage(`{"type":"object","properties":{
			"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},"score":{"type":"number","default":95.5},
			"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},"verified":{"type":"boolean","default":true}}}`), "Elicitation completed: ")
	})
	tool("test_elicitation_sep1330_enums", "Asks the user, with enums.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return elicit(ctx, req, "Please select options from the enum fields", json.RawMessage(`{"type":"object","properties":{
			"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
			"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
			"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
			"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},
			"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`), "Elicitation completed: ")
	})
	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features", InputSchema: json.RawMessage(`{
		"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},
		"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })

	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static binary resource.", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: redPixel}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource to subscribe to.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://watched-resource", MIMEType: "text/plain", Text: "Watched resource content."}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "Data for an id.", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}}, nil
		})

	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A simple prompt."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "This is a simple prompt for testing."}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with arguments.", Arguments: []*mcp.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource.", Arguments: []*mcp.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please process the embedded resource above."}},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please analyze the image above."}},
			}}, nil
		})
	return s
}
