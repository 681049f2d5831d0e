package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/webui"
)

// codeWebViewOff: the running node serves no web view, as its loopback
// HTTP listener is off.
const codeWebViewOff = "WEB_VIEW_OFF"

// openResult is what `nova-node open --json` prints.
type openResult struct {
	// URL opens the web view with the local token (in the fragment, which
	// the browser never sends to the node).
	URL string `json:"url"`
	// Page is the same page without the token: it asks for one.
	Page string `json:"page"`
}

func newOpenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "open",
		Short: "Print the URL of the node's live web view, with its local token",
		Long: `open prints the address of the running node's web view: one page, served by
the node on its loopback HTTP listener (the one serving /metrics), that shows
this node and its peers, the agents of each, channels, task swarms, shared
documents, events and metrics, live, and can send a message, propose a task
and read or set a document value.

The URL carries the data dir's local token after "#": the browser keeps it in
the tab and sends it with each of the page's requests, never in the address
it loads. Anyone holding the URL can drive the node as you: do not share it.
Open it in a browser on this machine.`,
		Example: `  nova-node open
  nova-node open --json
  xdg-open "$(nova-node open)"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			info, err := cl.ID(cmd.Context())
			if err != nil {
				return err
			}
			if info.MetricsURL == "" {
				return &exitError{code: 1, err: &codedError{code: codeWebViewOff, msg: "the node serves no web view: its loopback HTTP listener is off (metricsListen: off)"},
					hint: "set metricsListen in " + node.ConfigPath(info.DataDir) + " to a loopback address (127.0.0.1:0 picks a free port) and restart the node"}
			}
			tok, err := node.ReadLocalToken(info.DataDir)
			if err != nil {
				return fmt.Errorf("read the local token: %w", err)
			}
			page := strings.TrimSuffix(info.MetricsURL, "/metrics") + webui.Prefix
			res := openResult{URL: page + "#token=" + url.QueryEscape(tok), Page: page}
			if g.json {
				return g.printJSON(res)
			}
			_, err = fmt.Fprintln(g.stdout, res.URL)
			return err
		},
	}
}
