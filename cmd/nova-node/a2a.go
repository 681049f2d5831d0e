package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
"nova-node a2a call" is an A2A client for any agent on the web.`,
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
			if token != "" {
				opts = append(opts, a2ahttp.WithBearerToken(token))
			}
			res := a2ahttp.NewClient(opts...).Send(cmd.Context(), a[0], a2ahttp.Message{Text: msg, ContextID: contextID, TaskID: taskID})
			if !res.Success {
				e := &exitError{code: 1, err: &codedError{res.Code, res.Error}, result: res}
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
	call.Flags().StringVar(&token, "token", "", "bearer token, if the agent requires one")
	call.Flags().StringVar(&contextID, "context", "", "continue this conversation (contextId)")
	call.Flags().StringVar(&taskID, "task", "", "continue this task (after input-required)")
	call.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	c.AddCommand(call)
	c.AddCommand(&cobra.Command{
		Use:   "token",
		Short: "Make a bearer token for the A2A gateway: the token for clients, its hash for config.yaml",
		Long: `Print a new random bearer token and its SHA-256. Give the token to A2A clients;
put the hash (never the token) under a2a.tokenHashes in config.yaml. A gateway
listening beyond loopback requires one.`,
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
			if g.json {
				return g.printJSON(map[string]string{"token": tok, "hash": hash})
			}
			fmt.Fprintf(g.stdout, "token: %s\n\nIn config.yaml:\n\na2a:\n  tokenHashes:\n    - %s\n", tok, hash)
			return nil
		},
	})
	return c
}
