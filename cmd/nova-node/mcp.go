package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

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
	drain := defaultDrainTimeout
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
port "nova-node status" shows for metrics).`,
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
			err = relay(cmd.Context(), cmd.InOrStdin(), g.stdout, conn, drain, g.stderr)
			if errors.Is(err, errDrainTimeout) {
				return &exitError{code: 1} // said on stderr; stdout is JSON-RPC only
			}
			return err
		},
	}
	c.Flags().DurationVar(&drain, "drain-timeout", defaultDrainTimeout, "after stdin closes, how long to wait for the answers still due (0: no bound)")
	return c
}

// defaultDrainTimeout bounds how long `nova-node mcp` waits, once stdin
// closed, for the answers to the requests it relayed (--drain-timeout).
const defaultDrainTimeout = 30 * time.Second

// errDrainTimeout: stdin closed and answers were still due when the drain
// timeout ran out.
var errDrainTimeout = errors.New("answers still due when the drain timeout ran out")

// relay copies newline-delimited JSON-RPC from in to conn and from conn to
// out until either side ends. When in ends (stdin closed), it waits for the
// answers to the requests already relayed before it closes conn, so that
// `echo REQUEST | nova-node mcp` prints the answer; it waits at most drain
// (no bound if drain <= 0), then says on stderr which ids went unanswered
// and returns errDrainTimeout. Ids are matched by value (2.0 answers 2,
// "\u0061" answers "a"); a request the client cancelled
// (notifications/cancelled) is not waited for, and an error answer whose id
// is null (one the server could not attribute) stands for one of the
// requests still due. A line of in that is not JSON gets a JSON-RPC parse
// error (-32700, id null) on out, as JSON-RPC 2.0 asks of a server, and is
// not relayed: the SDK's transport would end the session on it without a
// word.
func relay(ctx context.Context, in io.Reader, out io.Writer, conn io.ReadWriteCloser, drain time.Duration, stderr io.Writer) error {
	var mu sync.Mutex            // out, and the ids waiting for an answer
	waiting := map[string]bool{} // idKey of each request due an answer
	unattributed := 0            // error answers with a null id
	inDone := false
	drained := make(chan struct{}) // closed when in ended and nothing waits
	var once sync.Once
	checkDrained := func() { // with mu held
		if inDone && len(waiting) <= unattributed {
			once.Do(func() { close(drained) })
		}
	}
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := out.Write(b)
		return err
	}
	fromIn, toOut := make(chan error, 1), make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if t := bytes.TrimSpace(line); len(t) > 0 {
				if !json.Valid(t) {
					if werr := write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}` + "\n")); werr != nil {
						fromIn <- werr
						return
					}
				} else {
					mu.Lock()
					for _, m := range rpcMessages(t) {
						switch {
						case m.isRequest():
							waiting[m.key] = true
						case m.cancels != "":
							delete(waiting, m.cancels) // the server will not answer it
						}
					}
					mu.Unlock()
					if _, werr := conn.Write(append(t, '\n')); werr != nil {
						fromIn <- werr
						return
					}
				}
			}
			if err != nil {
				mu.Lock()
				inDone = true
				checkDrained()
				mu.Unlock()
				fromIn <- err
				return
			}
		}
	}()
	go func() {
		r := bufio.NewReaderSize(conn, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				mu.Lock()
				_, werr := out.Write(line)
				for _, m := range rpcMessages(bytes.TrimSpace(line)) {
					switch {
					case m.hasMethod:
					case m.key != "":
						delete(waiting, m.key)
					case m.isError:
						unattributed++
					}
				}
				checkDrained()
				mu.Unlock()
				if werr != nil {
					toOut <- werr
					return
				}
			}
			if err != nil {
				toOut <- err
				return
			}
		}
	}()
	var err error
	select {
	case err = <-fromIn:
		if errors.Is(err, io.EOF) {
			// stdin ended: the answers still due come first.
			var timeout <-chan time.Time
			if drain > 0 {
				t := time.NewTimer(drain)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-drained:
			case err = <-toOut:
				toOut <- err
			case <-ctx.Done():
			case <-timeout:
				mu.Lock()
				due := make([]string, 0, len(waiting))
				for k := range waiting {
					due = append(due, idText(k))
				}
				mu.Unlock()
				sort.Strings(due)
				fmt.Fprintf(stderr, "nova-node mcp: stdin closed, and after %v %d answer(s) had not come (id %s); giving up\n",
					drain, len(due), strings.Join(due, ", "))
				err = errDrainTimeout
			}
		}
	case err = <-toOut:
		toOut <- err
	case <-ctx.Done():
	}
	conn.Close() // ends the copy from conn
	<-toOut
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// rpcMessage is what relay needs of one JSON-RPC message.
type rpcMessage struct {
	key       string // idKey of its id; "" for none or null
	hasMethod bool   // a request or a notification
	isError   bool   // a response with an error member
	cancels   string // notifications/cancelled: idKey of the request cancelled
}

func (m rpcMessage) isRequest() bool { return m.hasMethod && m.key != "" }

// rpcMessages decodes the messages of line (one message or a batch); what
// is not a JSON object is left out.
func rpcMessages(line []byte) []rpcMessage {
	var raws []json.RawMessage
	if len(line) > 0 && line[0] == '[' {
		if json.Unmarshal(line, &raws) != nil {
			return nil
		}
	} else {
		raws = []json.RawMessage{line}
	}
	var msgs []rpcMessage
	for _, raw := range raws {
		var w struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
			Error  json.RawMessage `json:"error"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw, &w) != nil {
			continue
		}
		m := rpcMessage{key: idKey(w.ID), hasMethod: len(w.Method) > 0 && string(w.Method) != "null",
			isError: len(w.Error) > 0 && string(w.Error) != "null"}
		var method string
		if m.hasMethod && json.Unmarshal(w.Method, &method) == nil && method == "notifications/cancelled" && m.key == "" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(w.Params, &p) == nil {
				m.cancels = idKey(p.RequestID)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// idKey is a JSON-RPC id as relay compares it: by value, so that the text
// a server writes back need not be the client's byte for byte. A string is
// "s:" and its decoded value; a number "n:" and its exact value in a
// canonical form (2, 2.0, 20e-1 and 2E0 are one id; big numbers are kept
// whole, not rounded to a float64); anything else (not a legal id) is "j:"
// and its compact JSON. Null or absent: "".
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	case c == '-' || c >= '0' && c <= '9':
		if n, ok := canonNumber(string(raw)); ok {
			return "n:" + n
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "j:" + string(raw)
	}
	return "j:" + b.String()
}

// idText is an idKey as JSON text again, for messages.
func idText(key string) string {
	switch {
	case strings.HasPrefix(key, "s:"):
		b, _ := json.Marshal(key[2:])
		return string(b)
	case strings.HasPrefix(key, "n:"):
		d, e, _ := strings.Cut(key[2:], "e")
		if e == "0" {
			return d
		}
		return key[2:]
	}
	return strings.TrimPrefix(key, "j:")
}

// canonNumber writes the JSON number s exactly, as its significant digits
// (no leading or trailing zeros), "e" and a decimal exponent: "2.50" and
// "25e-1" are "25e-1", "-0.0" is "0e0". It does no arithmetic on the value,
// so no number is too big or too precise for it.
func canonNumber(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if hasExp {
		var err error
		if exp, err = strconv.ParseInt(strings.TrimPrefix(expText, "+"), 10, 64); err != nil {
			return "", false
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	if exp > 1<<40 || exp < -1<<40 { // keeps the sums below from wrapping
		return "", false
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0e0", true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if neg {
		trimmed = "-" + trimmed
	}
	return trimmed + "e" + strconv.FormatInt(exp, 10), true
}

// mcpSession connects an MCP client to the node's aggregated face.
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
	if code == mcpbridge.CodeToolFailed {
		return err
	}
	msg := err.Error()
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Message != "" {
		msg = strings.TrimPrefix(je.Message, code+": ")
	}
	return &exitError{code: 1, err: &codedError{code, msg}, hint: mcpHints[code]}
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
				if !g.json {
					printContent(g.stdout, res.Content)
					return &exitError{code: 1} // the content is the tool's error
				}
				return &exitError{code: 1, result: res, err: &codedError{mcpbridge.CodeToolFailed, "tool " + a[0] + " failed: " + contentText(res.Content)},
					hint: "the tool's own error: its arguments (`nova-node tools list --json` shows its input schema) or its server"}
			}
			if g.json {
				return g.printJSON(res)
			}
			printContent(g.stdout, res.Content)
			if res.StructuredContent != nil {
				b, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
				fmt.Fprintln(g.stdout, string(b))
			}
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
