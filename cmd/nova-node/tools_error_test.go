package main

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/mcpbridge"
)

// The CLI reads a failed call's code from _meta (tools with an output
// schema carry it nowhere else), then from structuredContent.error.
func TestToolErrorCode(t *testing.T) {
	for name, c := range map[string]struct {
		res  *mcp.CallToolResult
		want string
	}{
		"meta":       {&mcp.CallToolResult{IsError: true, Meta: mcp.Meta{mcpbridge.MetaError: map[string]any{"code": "BACKEND_UNAVAILABLE"}}}, "BACKEND_UNAVAILABLE"},
		"structured": {&mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"error": map[string]any{"code": "TIER_VIOLATION"}}}, "TIER_VIOLATION"},
		"none":       {&mcp.CallToolResult{IsError: true}, mcpbridge.CodeToolFailed},
	} {
		if got := toolErrorCode(c.res); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
}
