package mcpbridge

import (
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeToolResult decodes a tools/call result into out as the go-sdk's
// CallToolResult.UnmarshalJSON does, with the same JSON library and flags
// (segmentio's, with case-sensitive field names), but without the fresh
// 32 KiB stream decoder that UnmarshalJSON builds for every result: that
// decoder was most of what a remote tool call allocated on the calling
// node. Results of text content (nearly all of them) are decoded here;
// any other content, a resultType, a content item that is null, and JSON
// nested deeper than the go-sdk accepts go to the go-sdk itself, so the
// value or the error is the go-sdk's in every case.
func decodeToolResult(raw []byte, out *mcp.CallToolResult) error {
	if !withinDepth(raw, sdkMaxDepth) {
		return json.Unmarshal(raw, out)
	}
	var w fastResult
	if _, err := segjson.Parse(raw, &w, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return json.Unmarshal(raw, out)
	}
	if w.ResultType != nil {
		return json.Unmarshal(raw, out)
	}
	content := make([]mcp.Content, 0, len(w.Content))
	for _, c := range w.Content {
		if c == nil || c.Type != "text" {
			return json.Unmarshal(raw, out)
		}
		content = append(content, &mcp.TextContent{Text: c.Text, Meta: c.Meta, Annotations: c.Annotations})
	}
	w.callToolResult.Content = content
	*out = mcp.CallToolResult(w.callToolResult)
	return nil
}

// sdkMaxDepth is the deepest nesting of JSON objects and arrays the go-sdk
// decodes.
const sdkMaxDepth = 1000

// callToolResult is mcp.CallToolResult without its methods, so that
// decoding it does not call the go-sdk's UnmarshalJSON.
type callToolResult mcp.CallToolResult

// fastResult mirrors the go-sdk's wire form of a CallToolResult: its
// content items are decoded with every field the go-sdk decodes, so that
// what fails there fails here.
type fastResult struct {
	callToolResult
	Content    []*fastContent `json:"content"`
	ResultType *string        `json:"resultType"`
}

// fastContent is the go-sdk's wireContent: one content item of any type.
type fastContent struct {
	Type              string                `json:"type"`
	Text              string                `json:"text,omitempty"`
	MIMEType          string                `json:"mimeType,omitempty"`
	Data              []byte                `json:"data,omitempty"`
	Resource          *mcp.ResourceContents `json:"resource,omitempty"`
	URI               string                `json:"uri,omitempty"`
	Name              string                `json:"name,omitempty"`
	Title             string                `json:"title,omitempty"`
	Description       string                `json:"description,omitempty"`
	Size              *int64                `json:"size,omitempty"`
	Meta              mcp.Meta              `json:"_meta,omitempty"`
	Annotations       *mcp.Annotations      `json:"annotations,omitempty"`
	Icons             []mcp.Icon            `json:"icons,omitempty"`
	ID                string                `json:"id,omitempty"`
	Input             map[string]any        `json:"input,omitempty"`
	ToolUseID         string                `json:"toolUseId,omitempty"`
	NestedContent     []*fastContent        `json:"content,omitempty"`
	StructuredContent any                   `json:"structuredContent,omitempty"`
	IsError           bool                  `json:"isError,omitempty"`
}

// withinDepth reports whether data nests objects and arrays at most max
// deep, counting as the go-sdk does (brackets outside strings).
func withinDepth(data []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > max {
				return false
			}
		case (b == '}' || b == ']') && depth > 0:
			depth--
		}
	}
	return true
}
