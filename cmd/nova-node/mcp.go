package main

import "github.com/spf13/cobra"

// mcpCommands: mcp, tools, resources, prompts (issue 5).
func mcpCommands(g *globals) []*cobra.Command { return nil }
