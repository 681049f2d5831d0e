package localapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/protocol"
)

// Client talks to a running node's local API.
type Client struct {
	hc   *http.Client
	path string
}

// NewClient returns a client of the node whose API socket is path (the
// node's Config.APISocketPath()).
func NewClient(path string) *Client {
	return &Client{path: path, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}
}

// noNode is err from a request to the node's socket, as ErrNoNode when
// nothing listens there.
func (c *Client) noNode(err error) error {
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Op == "dial" {
		return fmt.Errorf("%w (socket %s): start one with `nova-node run`", ErrNoNode, c.path)
	}
	return err
}

// openStream sends a GET for a stream of JSON values (events, a
// document's changes, a swarm's progress) and returns the response once
// the node answered it with success; a refusal is the node's APIError.
func (c *Client) openStream(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://nova"+url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.noNode(err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ae APIError
		if json.Unmarshal(b, &ae) == nil && ae.Code != "" {
			return nil, &ae
		}
		return nil, fmt.Errorf("node API %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://nova"+url, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.noNode(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var ae APIError
		if json.Unmarshal(b, &ae) == nil && ae.Code != "" {
			return &ae
		}
		var sr SendResult
		if json.Unmarshal(b, &sr) == nil && sr.Error != nil {
			return sr.Error
		}
		return fmt.Errorf("node API %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// ID returns the node's identity and addresses.
func (c *Client) ID(ctx context.Context) (IDInfo, error) {
	var v IDInfo
	return v, c.do(ctx, "GET", "/v1/id", nil, &v)
}

// Agents lists cards; origin is "", "local" or "remote".
func (c *Client) Agents(ctx context.Context, origin string) ([]agentcard.Card, error) {
	var v []agentcard.Card
	u := "/v1/agents"
	if origin != "" {
		u += "?origin=" + origin
	}
	return v, c.do(ctx, "GET", u, nil, &v)
}

// Send asks the node to send an envelope.
func (c *Client) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	var v SendResult
	return v, c.do(ctx, "POST", "/v1/send", req, &v)
}

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var v Status
	return v, c.do(ctx, "GET", "/v1/status", nil, &v)
}

// Channels lists the node's outbound channels.
func (c *Client) Channels(ctx context.Context) ([]protocol.ChannelInfo, error) {
	var v []protocol.ChannelInfo
	return v, c.do(ctx, "GET", "/v1/channels", nil, &v)
}

// CloseChannel closes one of the node's outbound channels (see the node's
// CloseChannel) and returns it as it was.
func (c *Client) CloseChannel(ctx context.Context, id string) (protocol.ChannelInfo, error) {
	var v protocol.ChannelInfo
	return v, c.do(ctx, "POST", "/v1/channels/"+url.PathEscape(id)+"/close", nil, &v)
}

// ResetMetrics zeroes the node's message metrics.
func (c *Client) ResetMetrics(ctx context.Context) (Metrics, error) {
	var v Metrics
	return v, c.do(ctx, "POST", "/v1/metrics/reset", nil, &v)
}

// Events calls fn for the last limit recent events (0: all the node keeps;
// negative: none) and, with follow, for every new one until ctx ends, fn
// returns an error, or the node stops: fn then gets an [EvtNodeStopped]
// event last and Events returns nil. A stream cut without it (the node was
// killed) is an error.
func (c *Client) Events(ctx context.Context, limit int, follow bool, fn func(Event) error) error {
	u := fmt.Sprintf("/v1/events?limit=%d", limit)
	if follow {
		u += "&follow=1"
	}
	resp, err := c.openStream(ctx, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var e Event
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return &streamBrokenError{path: c.path, err: err}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// FindAgents asks the node to find agents by name, capability or tier.
func (c *Client) FindAgents(ctx context.Context, name, capability, tier, as string) ([]agentcard.Card, error) {
	q := url.Values{}
	for k, v := range map[string]string{"name": name, "capability": capability, "tier": tier, "as": as} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var v []agentcard.Card
	return v, c.do(ctx, "GET", "/v1/agents/find?"+q.Encode(), nil, &v)
}

// Ping measures round trips to a peer or to the host of an agent.
func (c *Client) Ping(ctx context.Context, target string, count int) (PingResult, error) {
	var v PingResult
	return v, c.do(ctx, "POST", "/v1/ping", map[string]any{"target": target, "count": count}, &v)
}

// Connect asks the node to dial a peer.
func (c *Client) Connect(ctx context.Context, addr string) (string, error) {
	var v map[string]string
	err := c.do(ctx, "POST", "/v1/connect", map[string]string{"addr": addr}, &v)
	return v["peerId"], err
}

// Docs lists the node's open documents.
func (c *Client) Docs(ctx context.Context) ([]crdt.Info, error) {
	var v []crdt.Info
	return v, c.do(ctx, "GET", "/v1/crdt", nil, &v)
}

// ReadDoc reads a document at path. A document that neither the node nor
// its connected peers hold is an error with code CodeDocNotFound.
func (c *Client) ReadDoc(ctx context.Context, doc, path string) (DocView, error) {
	var v DocView
	return v, c.do(ctx, "GET", "/v1/crdt/"+doc+"?path="+url.QueryEscape(path), nil, &v)
}

// ForgetDoc closes a document on the node and deletes its local copy
// (other nodes keep theirs).
func (c *Client) ForgetDoc(ctx context.Context, doc string) (DocForgotten, error) {
	var v DocForgotten
	return v, c.do(ctx, "DELETE", "/v1/crdt/"+doc, nil, &v)
}

// ApplyDocOp changes a document.
func (c *Client) ApplyDocOp(ctx context.Context, doc string, op DocOp) (DocView, error) {
	var v DocView
	return v, c.do(ctx, "POST", "/v1/crdt/"+doc, op, &v)
}

// WatchDoc calls fn for every change of doc until ctx ends.
func (c *Client) WatchDoc(ctx context.Context, doc string, fn func(crdt.Change) error) error {
	resp, err := c.openStream(ctx, "/v1/crdt/"+doc+"/watch")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ch crdt.Change
		if err := dec.Decode(&ch); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			// Cut off mid-stream (the node was killed): an ErrNoNode, as
			// for the events stream.
			return &docStreamBrokenError{doc: doc, streamBrokenError: streamBrokenError{path: c.path, err: err}}
		}
		if err := fn(ch); err != nil {
			return err
		}
	}
}

// DialMCP opens the MCP relay: a byte stream of newline-delimited JSON-RPC
// to the node's aggregated MCP server.
func (c *Client) DialMCP(ctx context.Context) (io.ReadWriteCloser, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil, fmt.Errorf("%w (socket %s): start one with `nova-node run`", ErrNoNode, c.path)
	}
	if _, err := io.WriteString(conn, "POST /v1/mcp HTTP/1.1\r\nHost: nova\r\nConnection: Upgrade\r\nUpgrade: "+MCPUpgrade+"\r\nContent-Length: 0\r\n\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		var e APIError
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		resp.Body.Close()
		conn.Close()
		if e.Code == "" {
			e = APIError{Code: "UNAVAILABLE", Message: resp.Status}
		}
		return nil, &e
	}
	return &upgraded{Reader: br, Conn: conn}, nil
}

// upgraded reads through the buffer that read the 101 answer (it may hold
// the server's first bytes) and writes to the connection.
type upgraded struct {
	*bufio.Reader
	net.Conn
}

func (u *upgraded) Read(p []byte) (int, error) { return u.Reader.Read(p) }

// MCPBackends asks the node for its MCP servers' state.
func (c *Client) MCPBackends(ctx context.Context) ([]mcpbridge.BackendStatus, error) {
	var out []mcpbridge.BackendStatus
	err := c.do(ctx, http.MethodGet, "/v1/mcp/backends", nil, &out)
	return out, err
}
