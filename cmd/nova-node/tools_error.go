package main

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/mcpbridge"
)

// toolErrorCode is the code of a failed tool call: the one the node put in
// the result's _meta (mcpbridge.MetaError), or in structuredContent.error
// for a tool without an output schema, else TOOL_EXECUTION_FAILED.
func toolErrorCode(res *mcp.CallToolResult) string {
	var v struct {
		Code string `json:"code"`
	}
	if b, err := json.Marshal(res.Meta[mcpbridge.MetaError]); err == nil && json.Unmarshal(b, &v) == nil && v.Code != "" {
		return v.Code
	}
	var sc struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &sc) == nil && sc.Error.Code != "" {
		return sc.Error.Code
	}
	return mcpbridge.CodeToolFailed
}
