package main

import "github.com/spf13/cobra"

// newTasksCmd, newSwarmCmd and newDemoCmd: task negotiation, swarms and the
// demo (issue 7).
func taskCommands(g *globals) []*cobra.Command { return nil }
