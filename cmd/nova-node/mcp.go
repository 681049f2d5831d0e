package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/node"
)

// mcpCommands: mcp, tools, resources, prompts.
func mcpCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newMCPCmd(g), newToolsCmd(g), newResourcesCmd(g), newPromptsCmd(g), newA2ACmd(g)}
}

func newMCPCmd(g *globals) *cobra.Command {
	drain := mcpbridge.DefaultDrainTimeout
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve every MCP tool, resource and prompt of the swarm on stdio (for Claude Desktop, IDEs, any MCP client)",
		Long: `Serve the swarm's MCP tools, resources and prompts to an MCP client over stdio.

The command relays stdin/stdout to the node running on this data dir (start
it with "nova-node run"), so each device runs one node however many clients
connect. Tools are named agent_tool (legal for strict clients); the title
carries the canonical agent.tool, which calls also accept. Calls run as the
node's first agent (or mcp.as in config.yaml), under its tier and sandbox.

Claude Desktop (claude_desktop_config.json):

  {"mcpServers": {"nova": {"command": "nova-node", "args": ["mcp"]}}}

Messages are newline-delimited JSON-RPC. When stdin closes, the answers to
the requests already sent are printed before the command exits; a line that
is not JSON gets a parse error (-32700) and the session goes on. Ids are
matched by value (an answer to "id":2.0 may say 2). A request cancelled
with notifications/cancelled is not waited for, and an error answer with
"id": null stands for one request still due. The wait is bounded by
--drain-timeout (default 30s, about the node's request timeout): when it
runs out, the command says on stderr which ids went unanswered (stdout
carries JSON-RPC only) and exits 1; it exits 0 when every answer came.

The same face is on streamable HTTP at http://127.0.0.1:<port>/mcp (the
port "nova-node status" shows for metrics); every request there carries
"Authorization: Bearer <token>", the token being in local.token in the data
dir (readable only by the node's owner). This command needs no token: it
uses the data dir's socket.`,
		Example: `  nova-node mcp
  nova-node mcp --data-dir ~/.nova-work`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if drain < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--drain-timeout %v: must be 0 (no bound) or more", drain), hint: helpHint(cmd)}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			conn, err := cl.DialMCP(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			err = mcpbridge.RelayStdio(cmd.Context(), cmd.InOrStdin(), g.stdout, conn, drain, g.stderr)
			if errors.Is(err, mcpbridge.ErrDrainTimeout) {
				return &exitError{code: 1} // said on stderr; stdout is JSON-RPC only
			}
			return err
		},
	}
	c.Flags().DurationVar(&drain, "drain-timeout", mcpbridge.DefaultDrainTimeout, "after stdin closes, how long to wait for the answers still due (0: no bound)")
	return c
}

func (g *globals) mcpSession(ctx context.Context) (*mcp.ClientSession, error) {
	cl, err := g.client()
	if err != nil {
		return nil, err
	}
	conn, err := cl.DialMCP(ctx)
	if err != nil {
		return nil, err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "nova-node-cli", Version: node.Version}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn, MaxLineLength: mcpbridge.MaxLine}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to the node's MCP face: %w", err)
	}
	return cs, nil
}

// mcpErr explains a JSON-RPC error with its seed code: the server's
// message, without the SDK's `calling "tools/call": ` and the code it
// starts with (report adds the code once), and a hint for a name that
// is not in the swarm.
func mcpErr(err error) error {
	code := mcpbridge.CodeOf(err)
	msg := err.Error()
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Message != "" {
		msg = je.Message
	}
	// The SDK prefixes `calling "prompts/get": `, once per session the
	// request crossed (a peer's server, then the node's face), and a
	// peer's refusal may carry its code only at the start of the text.
	msg = stripCalling(msg)
	if c, rest, ok := leadingCode(msg); ok {
		if code == mcpbridge.CodeToolFailed {
			code = c
		}
		if c == code {
			msg = rest
		}
	}
	if code == mcpbridge.CodeToolFailed && (je == nil || len(je.Data) == 0) && !strings.HasPrefix(err.Error(), "calling ") {
		return err // no MCP error: the session's own failure
	}
	return &exitError{code: 1, err: &codedError{code, msg}, hint: mcpHints[code]}
}

// stripCalling takes the SDK's `calling "METHOD": ` prefixes off msg.
func stripCalling(msg string) string {
	for strings.HasPrefix(msg, `calling "`) {
		_, rest, ok := strings.Cut(msg, `": `)
		if !ok {
			break
		}
		msg = rest
	}
	return msg
}

// leadingCode splits "CODE: message", where CODE is an error code
// (upper-case letters and underscores).
func leadingCode(msg string) (code, rest string, ok bool) {
	code, rest, ok = strings.Cut(msg, ": ")
	if !ok || len(code) < 3 || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
		return "", msg, false
	}
	return code, rest, true
}

// mcpHints is the advice for MCP failures by code.
var mcpHints = map[string]string{
	mcpbridge.CodeToolNotFound:     "`nova-node tools list` lists the swarm's tools: call one by its NAME or CANONICAL agent.tool",
	mcpbridge.CodePromptNotFound:   "`nova-node prompts list` lists the swarm's prompts: get one by its NAME or CANONICAL agent.prompt",
	mcpbridge.CodeResourceNotFound: "`nova-node resources list` lists the swarm's resources by URI",
	mcpbridge.CodeMissingArgument:  "`nova-node prompts list` marks required arguments with *: pass each with --arg name=value",
}

func newToolsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "tools",
		Short: "List and call the MCP tools of every agent in the swarm",
		Example: `  nova-node tools list
  nova-node tools call files.read --args '{"path":"README.md"}'`,
	}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every tool in the swarm: name on the MCP face, canonical agent.tool, source agent",
		Example: `  nova-node tools list
  nova-node tools list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			tools := []*mcp.Tool{} // --json: [] when there are none, not null
			for t, err := range cs.Tools(cmd.Context(), nil) {
				if err != nil {
					return mcpErr(err)
				}
				tools = append(tools, t)
			}
			if g.json {
				return g.printJSON(tools)
			}
			if len(tools) == 0 {
				fmt.Fprintln(g.stdout, "no tools in the swarm yet (declare mcpServers for an agent in config.yaml)")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCANONICAL\tAGENT\tDESCRIPTION")
			for _, t := range tools {
				agent, _ := t.Meta["nova/agent"].(string)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Title, agent, firstLine(t.Description))
			}
			return tw.Flush()
		},
	})
	var args string
	call := &cobra.Command{
		Use:   "call TOOL",
		Short: "Call a tool by agent.tool (or its agent_tool name) with JSON arguments",
		Long: `Call a tool of any agent in the swarm, wherever it runs. The call is made
once (never retried). A tool that fails prints its error, naming the source
agent and the code, and exits 1. A name no tool of the swarm has is
TOOL_NOT_FOUND (exit 1): ` + "`nova-node tools list`" + ` lists them.`,
		Example: `  nova-node tools call toolsmith.say --args '{"text":"hi"}'
  nova-node tools call toolsmith_add --args '{"a":2,"b":3}' --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			argv := map[string]any{}
			if strings.TrimSpace(args) != "" {
				if err := json.Unmarshal([]byte(args), &argv); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--args must be a JSON object, like '{\"text\":\"hi\"}': %v", err)}
				}
			}
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			res, err := cs.CallTool(cmd.Context(), &mcp.CallToolParams{Name: a[0], Arguments: argv})
			if err != nil {
				return mcpErr(err)
			}
			if res.IsError {
				const hint = "the tool's own error: its arguments (`nova-node tools list --json` shows its input schema) or its server"
				// The server's error text comes first, then the node's
				// summary, which repeats it with the code and the agent.
				content := withoutRepeats(res.Content)
				if !g.json {
					printContent(g.stdout, content)
					fmt.Fprintln(g.stderr, "hint:", hint)
					return &exitError{code: 1} // the content is the tool's error
				}
				return &exitError{code: 1, result: res, err: &codedError{toolErrorCode(res), "tool " + a[0] + " failed: " + contentText(content)}, hint: hint}
			}
			if g.json {
				return g.printJSON(res)
			}
			printResult(g.stdout, res)
			return nil
		},
	}
	call.Flags().StringVar(&args, "args", "", "tool arguments as a JSON object")
	c.AddCommand(call)
	return c
}

func printContent(w io.Writer, cs []mcp.Content) {
	for _, c := range cs {
		switch v := c.(type) {
		case *mcp.TextContent:
			fmt.Fprintln(w, v.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(w, "[image %s, %d bytes]\n", v.MIMEType, len(v.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(w, "[audio %s, %d bytes]\n", v.MIMEType, len(v.Data))
		default:
			b, _ := json.Marshal(c)
			fmt.Fprintln(w, string(b))
		}
	}
}

// printResult prints a tool's result once: a tool with structured output
// sends it as JSON text too (as MCP asks), so the structured content is
// printed indented in place of that text, and on its own only when no text
// carries it.
func printResult(w io.Writer, res *mcp.CallToolResult) {
	if res.StructuredContent == nil {
		printContent(w, res.Content)
		return
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		printContent(w, res.Content)
		return
	}
	var rest []mcp.Content
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && sameJSON(t.Text, structured) {
			continue
		}
		rest = append(rest, c)
	}
	printContent(w, rest)
	b, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
	fmt.Fprintln(w, string(b))
}

// sameJSON reports whether text is JSON equal to b.
func sameJSON(text string, b []byte) bool {
	var x, y any
	if json.Unmarshal([]byte(text), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// withoutRepeats is cs without the texts that another text of cs
// contains.
func withoutRepeats(cs []mcp.Content) []mcp.Content {
	var out []mcp.Content
	for i, c := range cs {
		t, ok := c.(*mcp.TextContent)
		repeated := false
		for j, o := range cs {
			if ot, ok2 := o.(*mcp.TextContent); ok && ok2 && i != j && strings.TrimSpace(t.Text) != "" &&
				len(ot.Text) > len(t.Text) && strings.Contains(ot.Text, strings.TrimSpace(t.Text)) {
				repeated = true
				break
			}
		}
		if !repeated {
			out = append(out, c)
		}
	}
	return out
}

// contentText is cs as printContent prints it, on one line.
func contentText(cs []mcp.Content) string {
	var b strings.Builder
	printContent(&b, cs)
	return strings.Join(strings.Fields(b.String()), " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func newResourcesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "resources",
		Short: "List and read the MCP resources of the swarm",
		Example: `  nova-node resources list
  nova-node resources read nova://notes/today`,
	}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every resource in the swarm",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			rs := []*mcp.Resource{}
			for r, err := range cs.Resources(cmd.Context(), nil) {
				if err != nil {
					return mcpErr(err)
				}
				rs = append(rs, r)
			}
			if g.json {
				return g.printJSON(rs)
			}
			if len(rs) == 0 {
				fmt.Fprintln(g.stdout, "no resources in the swarm yet (declare mcpServers for an agent in config.yaml)")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "URI\tMIME\tAGENT\tNAME")
			for _, r := range rs {
				agent, _ := r.Meta["nova/agent"].(string)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.URI, r.MIMEType, agent, r.Name)
			}
			return tw.Flush()
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "read URI",
		Short: "Read a resource: its text, or its size for binary content (--json for everything)",
		Long: `Read a resource of any agent in the swarm by its URI: its text, or its size
for binary content (--json for everything). A URI no resource of the swarm has
is RESOURCE_NOT_FOUND (exit 1): ` + "`nova-node resources list`" + ` lists them.`,
		Example: `  nova-node resources read nova://mcptest/readme`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			res, err := cs.ReadResource(cmd.Context(), &mcp.ReadResourceParams{URI: a[0]})
			if err != nil {
				return mcpErr(err)
			}
			if g.json {
				return g.printJSON(res)
			}
			for _, c := range res.Contents {
				if c.Blob != nil {
					fmt.Fprintf(g.stdout, "[%s, %d bytes; use --json for the base64 content]\n", c.MIMEType, len(c.Blob))
					continue
				}
				fmt.Fprint(g.stdout, c.Text)
				if !strings.HasSuffix(c.Text, "\n") {
					fmt.Fprintln(g.stdout)
				}
			}
			return nil
		},
	})
	return c
}

func newPromptsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "prompts",
		Short: "List and render the MCP prompts of the swarm",
		Example: `  nova-node prompts list
  nova-node prompts get toolsmith.greet --arg name=Ada`,
	}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every prompt in the swarm with its arguments",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			ps := []*mcp.Prompt{}
			for p, err := range cs.Prompts(cmd.Context(), nil) {
				if err != nil {
					return mcpErr(err)
				}
				ps = append(ps, p)
			}
			if g.json {
				return g.printJSON(ps)
			}
			if len(ps) == 0 {
				fmt.Fprintln(g.stdout, "no prompts in the swarm yet (declare mcpServers for an agent in config.yaml)")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCANONICAL\tARGUMENTS\tDESCRIPTION")
			for _, p := range ps {
				var args []string
				for _, a := range p.Arguments {
					s := a.Name
					if a.Required {
						s += "*"
					}
					args = append(args, s)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Title, strings.Join(args, ","), firstLine(p.Description))
			}
			return tw.Flush()
		},
	})
	var kv []string
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Render a prompt with arguments (--arg k=v, repeatable; * marks required ones in list)",
		Long: `Render a prompt of any agent in the swarm, by its name or canonical
agent.prompt, with --arg name=value for each argument. A name no prompt of the
swarm has is PROMPT_NOT_FOUND, a required argument left out is
MISSING_PROMPT_ARGUMENT (exit 1 both): ` + "`nova-node prompts list`" + ` lists the
prompts and marks required arguments with *.`,
		Example: `  nova-node prompts get toolsmith.greet --arg name=Ada`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			args := map[string]string{}
			for _, s := range kv {
				k, v, ok := strings.Cut(s, "=")
				if !ok || k == "" {
					return &exitError{code: 2, err: fmt.Errorf("--arg %q: use name=value", s)}
				}
				args[k] = v
			}
			cs, err := g.mcpSession(cmd.Context())
			if err != nil {
				return err
			}
			defer cs.Close()
			res, err := cs.GetPrompt(cmd.Context(), &mcp.GetPromptParams{Name: a[0], Arguments: args})
			if err != nil {
				return mcpErr(err)
			}
			if g.json {
				return g.printJSON(res)
			}
			for _, m := range res.Messages {
				fmt.Fprintf(g.stdout, "[%s]\n", m.Role)
				printContent(g.stdout, []mcp.Content{m.Content})
			}
			return nil
		},
	}
	get.Flags().StringArrayVar(&kv, "arg", nil, "prompt argument name=value (repeatable)")
	c.AddCommand(get)
	return c
}
