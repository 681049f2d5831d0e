package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

// codeAgentNotFound: a2a call found no agent card at the URL.
const codeAgentNotFound = "AGENT_NOT_FOUND"

func newA2ACmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "a2a",
		Short: "Talk to standard A2A agents, and manage the node's A2A gateway",
		Long: `The node serves every mesh agent to standard A2A clients at
http://127.0.0.1:<port>/a2a/<agent>/ (the address "nova-node run" prints; the
card is at .well-known/agent-card.json under it), speaking A2A v0.3 and v1.0.
"nova-node a2a call" is an A2A client for any agent on the web.

Every request to the gateway carries a bearer token: the data dir's local
token (the file local.token in the data dir, readable only by the node's
owner), or one whose hash is under a2a.tokenHashes in config.yaml.
"nova-node a2a call" sends the local token by itself to this node's gateway.`,
		Example: `  nova-node a2a call http://127.0.0.1:4713/a2a/bob/ --message "hello"
  nova-node a2a token`,
	}
	var msg, token, contextID, taskID string
	var timeout time.Duration
	call := &cobra.Command{
		Use:   "call URL",
		Short: "Send a message to an A2A agent: fetch its card, send, follow the task to its end",
		Long: `Fetch the agent's card (agent-card.json, then agent.json; A2A v0.3 or v1.0),
send the message, then stream or poll until the task ends or --timeout.
To the gateway of the node running on the data dir, the local token is
sent unless --token is given; to any other URL, only --token.
The outcome is printed (--json: a structured result with state, text, parts,
and on failure a code from the A2A client error table); exit 1 unless the
agent succeeded.`,
		Example: `  nova-node a2a call https://agent.example/ --message "summarise today's news"
  nova-node a2a call http://127.0.0.1:4713/a2a/bob/ --message "more" --context ctx-1 --task t-1 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if strings.TrimSpace(msg) == "" {
				return usage(cmd, "--message is required")
			}
			if u, err := url.Parse(a[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usage(cmd, fmt.Sprintf("%q is not an agent URL: give http(s)://HOST[:PORT]/PATH, like http://127.0.0.1:4713/a2a/bob/", a[0]))
			}
			opts := []a2ahttp.ClientOption{a2ahttp.WithTimeout(timeout)}
			if token == "" {
				token = g.localTokenFor(cmd.Context(), a[0])
			}
			if token != "" {
				opts = append(opts, a2ahttp.WithBearerToken(token))
			}
			res := a2ahttp.NewClient(opts...).Send(cmd.Context(), a[0], a2ahttp.Message{Text: msg, ContextID: contextID, TaskID: taskID})
			if !res.Success {
				e := &exitError{code: 1, err: &codedError{res.Code, res.Error}, result: res}
				if inner, rest, ok := trailingCode(res.Error); ok && res.Code == a2ahttp.CodeTaskFailed {
					// A nova-node gateway's task failed with a mesh error, whose
					// code ends its text: that code is the cause, and the
					// error carries it alone, with its advice.
					e.err = &codedError{inner, rest}
				}
				if res.HTTPStatus == http.StatusUnauthorized {
					e.hint = "the agent needs a bearer token: give it with --token; a nova-node gateway on this machine takes " +
						"the local token of its data dir, which this command sends by itself with --data-dir set to that data dir " +
						"(the node must be running, and you must be its owner)"
				}
				if res.Code == a2ahttp.CodeExternalService && res.HTTPStatus == http.StatusNotFound {
					// No card at the URL: no such agent there.
					res.Code = codeAgentNotFound
					e.err = &codedError{res.Code, res.Error}
					e.hint = "check the URL: a nova-node gateway serves each agent at http://HOST:PORT/a2a/NAME/ " +
						"(`nova-node agents` lists the names of the mesh's agents, `nova-node status` the gateway's address)"
				}
				return e
			}
			if g.json {
				return g.printJSON(res)
			}
			if res.State != "" {
				fmt.Fprintf(g.stderr, "[%s, task %s, context %s]\n", res.State, res.TaskID, res.ContextID)
			}
			fmt.Fprintln(g.stdout, res.ResponseText)
			return nil
		},
	}
	call.Flags().StringVarP(&msg, "message", "m", "", "the message text")
	call.Flags().StringVar(&token, "token", "", "bearer token, if the agent requires one (default: the local token, for this node's own gateway)")
	call.Flags().StringVar(&contextID, "context", "", "continue this conversation (contextId)")
	call.Flags().StringVar(&taskID, "task", "", "continue this task (after input-required)")
	call.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	c.AddCommand(call)
	c.AddCommand(&cobra.Command{
		Use:   "token",
		Short: "Make a bearer token for the A2A gateway: the token for clients, its hash for config.yaml",
		Long: `Print a new random bearer token and its SHA-256. Give the token to A2A clients;
put the hash (never the token) under a2a.tokenHashes in config.yaml. A gateway
listening beyond loopback requires one.

On this machine, the node's owner needs none: every local HTTP face (the A2A
gateway, /mcp, /metrics) accepts the local token, in the file local.token of
the data dir (made by the node when it starts, readable only by its owner):

  curl -H "Authorization: Bearer $(cat ~/.nova/local.token)" http://127.0.0.1:PORT/metrics`,
		Example: `  nova-node a2a token
  nova-node a2a token --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			tok := "nova_" + hex.EncodeToString(b)
			hash := a2ahttp.HashToken(tok)
			local := g.localTokenPath()
			if g.json {
				return g.printJSON(map[string]string{"token": tok, "hash": hash, "localTokenFile": local})
			}
			fmt.Fprintf(g.stdout, "token: %s\n\nIn config.yaml:\n\na2a:\n  tokenHashes:\n    - %s\n", tok, hash)
			fmt.Fprintf(g.stdout, "\nOn this machine, the node's owner can use the local token instead, in %s:\n\n"+
				"  curl -H \"Authorization: Bearer $(cat %s)\" http://127.0.0.1:PORT/...\n", local, local)
			return nil
		},
	})
	return c
}

// localDataDir is the selected data dir, absolute: the one whose socket
// g.client dials.
func (g *globals) localDataDir() string {
	dir := g.dataDir
	if cfg, _ := g.config(); cfg.DataDir != "" {
		dir = cfg.DataDir
	}
	if dir == "" {
		dir = node.DefaultDataDir()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

// localTokenPath is where the local token of the selected data dir is.
func (g *globals) localTokenPath() string {
	return filepath.Join(g.localDataDir(), node.LocalTokenFile)
}

// localTokenFor returns the local token of the node running on the
// selected data dir when rawURL is that node's A2A gateway, else "". The
// token goes only to the gateway's own address: another local user could
// listen on another loopback address or port and collect it.
func (g *globals) localTokenFor(ctx context.Context, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return ""
	}
	cl, err := g.client()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cl.ID(ctx)
	if err != nil || info.A2AURL == "" {
		return ""
	}
	gw, err := url.Parse(info.A2AURL)
	if err != nil || !sameListener(u.Host, gw.Host) {
		return ""
	}
	// The selected data dir, not info.DataDir: the node reports the path
	// it was given, relative to its own working directory.
	tok, err := node.ReadLocalToken(g.localDataDir())
	if err != nil {
		return ""
	}
	return tok
}

// sameListener reports whether host (of a URL) reaches the listener at
// addr: the same port, and the listener's address, or "localhost" for a
// listener on 127.0.0.1 or ::1, or any loopback address for a listener on
// every address.
func sameListener(host, addr string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = host, "80"
	}
	lh, lp, err := net.SplitHostPort(addr)
	if err != nil || p != lp {
		return false
	}
	h = strings.ToLower(h)
	la, err := netip.ParseAddr(lh)
	if err != nil {
		return false
	}
	la = la.Unmap()
	if h == "localhost" {
		return la == netip.MustParseAddr("127.0.0.1") || la == netip.IPv6Loopback() || la.IsUnspecified()
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return a == la || (la.IsUnspecified() && a.IsLoopback())
}
