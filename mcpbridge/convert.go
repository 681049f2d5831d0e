package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// MetaError is the _meta key of a failed tool call's structured error
// ({"code", "message", "agent", "tool"}), on every isError result the node
// sends.
const MetaError = "nova/error"

// toMCPResult turns a registry Result into an MCP tool result. A backend's
// result is stored as the JSON of an mcp.CallToolResult and comes back as
// is; any other JSON becomes structured content plus its text. An isError
// result names the code and the source agent (requirement 5.4) in its text
// and in _meta (MetaError); also in structuredContent.error, but only when
// the tool declares no output schema (hasOutputSchema false): MCP clients
// check structuredContent against a declared output schema, and would take
// the error object for a malformed result.
func toMCPResult(res Result, hasOutputSchema bool) *mcp.CallToolResult {
	if res.IsError {
		e := res.Error
		if e == nil {
			e = &ToolError{ErrCode: CodeToolFailed, Message: "tool reported an error"}
		}
		out := &mcp.CallToolResult{IsError: true}
		// A backend's own isError content is kept ahead of our summary.
		if res.call != nil {
			out.Content = append([]mcp.Content(nil), res.call.Content...)
		} else if len(res.Content) > 0 {
			var inner mcp.CallToolResult
			if json.Unmarshal(res.Content, &inner) == nil {
				out.Content = inner.Content
			}
		}
		out.Content = append(out.Content, &mcp.TextContent{Text: fmt.Sprintf("%s: %s (agent %s, tool %s)", e.ErrCode, e.Message, e.Agent, e.Tool)})
		obj := map[string]any{"code": e.ErrCode, "message": e.Message, "agent": e.Agent, "tool": e.Tool}
		out.Meta = mcp.Meta{MetaError: obj}
		if !hasOutputSchema {
			out.StructuredContent = map[string]any{"error": obj}
		}
		return out
	}
	if res.call != nil {
		out := *res.call
		return &out
	}
	if len(bytes.TrimSpace(res.Content)) == 0 {
		return &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if res.sent || isCallToolResult(res.Content) {
		var out mcp.CallToolResult
		err := json.Unmarshal(res.Content, &out)
		if err == nil {
			return &out
		}
		if res.sent {
			// A backend's result kept undecoded that the SDK cannot read
			// (an unknown content type): the call failed.
			return toMCPResult(Result{IsError: true, Error: &ToolError{ErrCode: CodeToolFailed, Message: "the tool's result is malformed: " + err.Error()}}, hasOutputSchema)
		}
	}
	var v any
	_ = json.Unmarshal(res.Content, &v)
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(res.Content)}}}
	if _, ok := v.(map[string]any); ok {
		out.StructuredContent = json.RawMessage(res.Content)
	}
	return out
}

// isCallToolResult reports whether raw is a JSON object with a "content"
// array, the shape of an MCP tool result.
func isCallToolResult(raw json.RawMessage) bool {
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	t := bytes.TrimSpace(probe.Content)
	return len(t) > 0 && t[0] == '['
}

// fromSentResult is the registry Result of a backend's answer as it sent
// it (raw): a successful result stays those bytes; an isError result, or
// one without a "content" array, is decoded (fromMCPResult).
func fromSentResult(raw json.RawMessage) (Result, error) {
	var probe struct {
		IsError bool        `json:"isError"`
		Content *[]struct{} `json:"content"`
	}
	if !probeSent(raw, &probe) || probe.IsError || probe.Content == nil {
		var r mcp.CallToolResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return Result{}, fmt.Errorf("mcpbridge: the server's tool result is malformed: %w", err)
		}
		return fromMCPResult(&r)
	}
	return Result{Content: raw, sent: true}, nil
}

// probeSent decodes what fromSentResult asks of a result into probe as
// the go-sdk reads it (decodeLine's library and flags), reporting whether
// it could.
func probeSent(raw json.RawMessage, probe any) bool {
	if !withinDepth(raw, sdkMaxDepth) {
		return false
	}
	_, err := segjson.Parse(raw, probe, segjson.DontMatchCaseInsensitiveStructFields)
	return err == nil
}

// fromMCPResult is the registry Result of a backend's (or a peer's) answer.
func fromMCPResult(r *mcp.CallToolResult) (Result, error) {
	if r == nil {
		return Result{Content: json.RawMessage(`{"content":[]}`)}, nil
	}
	c := *r
	isErr := c.IsError
	c.IsError = false
	raw, err := json.Marshal(&c)
	if err != nil {
		return Result{}, fmt.Errorf("mcpbridge: encode tool result: %w", err)
	}
	res := Result{Content: raw, IsError: isErr, call: &c}
	if isErr {
		res.Error = &ToolError{ErrCode: CodeToolFailed, Message: resultText(r)}
		if e := resultError(r); e != nil {
			if code, _ := e["code"].(string); code != "" {
				res.Error.ErrCode = code
			}
			if msg, _ := e["message"].(string); msg != "" {
				res.Error.Message = msg
			}
			if a, _ := e["agent"].(string); a != "" {
				res.Error.Agent = a
			}
		}
	}
	return res, nil
}

// resultError is the node's error object of an isError result: in _meta
// (MetaError), or in structuredContent.error as nodes put it for tools
// without an output schema; nil when neither holds one.
func resultError(r *mcp.CallToolResult) map[string]any {
	if e, ok := r.Meta[MetaError].(map[string]any); ok {
		return e
	}
	if m, ok := r.StructuredContent.(map[string]any); ok {
		if e, ok := m["error"].(map[string]any); ok {
			return e
		}
	}
	return nil
}

// fitError makes a peer's isError result fit its tool's declared output
// schema: a structuredContent, which a client would check against the
// schema and refuse, is dropped, its error object kept in _meta.
func fitError(r *mcp.CallToolResult, hasOutputSchema bool) {
	if r == nil || !r.IsError || !hasOutputSchema || r.StructuredContent == nil {
		return
	}
	if e := resultError(r); e != nil {
		if r.Meta == nil {
			r.Meta = mcp.Meta{}
		}
		if _, ok := r.Meta[MetaError]; !ok {
			r.Meta[MetaError] = e
		}
	}
	r.StructuredContent = nil
}

// resultText joins the text content of r, capped.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	s := strings.Join(parts, "\n")
	if len(s) > 1024 {
		s = s[:1024]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if s == "" {
		s = "tool reported an error"
	}
	return s
}

// toResourceResult is the MCP answer to a resource read.
func toResourceResult(rc ResourceContent) *mcp.ReadResourceResult {
	c := &mcp.ResourceContents{URI: rc.URI, MIMEType: rc.MIMEType}
	if isText(rc.MIMEType, rc.Data) {
		c.Text = string(rc.Data)
	} else {
		c.Blob = rc.Data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}
}

func isText(mime string, data []byte) bool {
	if strings.HasPrefix(mime, "text/") || strings.HasSuffix(mime, "json") || strings.HasSuffix(mime, "xml") || strings.HasSuffix(mime, "yaml") {
		return utf8.Valid(data)
	}
	return mime == "" && utf8.Valid(data)
}

// fromResourceResult keeps the first content of a read (text or blob).
func fromResourceResult(uri string, r *mcp.ReadResourceResult) ResourceContent {
	out := ResourceContent{URI: uri}
	if r == nil || len(r.Contents) == 0 || r.Contents[0] == nil {
		return out
	}
	c := r.Contents[0]
	out.MIMEType = c.MIMEType
	if c.Blob != nil {
		out.Data = c.Blob
	} else {
		out.Data = []byte(c.Text)
	}
	return out
}

// promptText joins the text of a prompt's messages.
func promptText(r *mcp.GetPromptResult) string {
	var parts []string
	for _, m := range r.Messages {
		if m == nil {
			continue
		}
		if t, ok := m.Content.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

func promptArgs(args []PromptArg) []*mcp.PromptArgument {
	out := make([]*mcp.PromptArgument, 0, len(args))
	for _, a := range args {
		out = append(out, &mcp.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
	}
	return out
}
