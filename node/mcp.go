package node

import (
	"context"
	"net/http"

	"github.com/libp2p/go-libp2p/core/host"
)

// mcpState is the node's MCP bridge.
type mcpState struct{}

func (n *Node) startMCP(ctx context.Context, h host.Host) error { return nil }

func (n *Node) closeMCP() {}

func (n *Node) mcpHTTP() http.Handler { return nil }

func (n *Node) registerMCPRoutes(mux *http.ServeMux) {}
