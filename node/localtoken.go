package node

import (
	"net/http"
	"path/filepath"

	"github.com/nova-node/nova-node/internal/localhttp"
	"github.com/nova-node/nova-node/node/webui"
)

// LocalTokenFile is the file in the data dir holding the local token: the
// bearer token every request to the node's local HTTP faces (/metrics,
// /mcp, the A2A gateway) must carry, so that only the data dir's owner
// can use them. Start creates it (mode 0600) when it is missing and
// refuses to run when other users may read it.
const LocalTokenFile = localhttp.TokenFile

// ReadLocalToken reads the local token of dataDir, for a client of the
// node's local HTTP faces. See [localhttp.ReadToken] for its errors.
func ReadLocalToken(dataDir string) (string, error) { return localhttp.ReadToken(dataDir) }

// loadLocalToken reads the data dir's local token, creating it if
// missing. Start calls it before anything listens, and keeps it on the
// Node for the local faces.
func (n *Node) loadLocalToken() (string, error) {
	return localhttp.EnsureToken(n.cfg.DataDir)
}

// localTokenHint tells a refused client where the token is.
func (n *Node) localTokenHint() string {
	dir, err := filepath.Abs(n.cfg.DataDir)
	if err != nil {
		dir = n.cfg.DataDir
	}
	return localhttp.TokenHint(dir)
}

// localFaces is what the loopback HTTP listener of startMetrics serves
// besides /metrics and /healthz, and the token every request to it must
// carry.
type localFaces struct {
	mcp   http.Handler  // the MCP streamable HTTP face, at /mcp
	ui    *webui.Server // the web view, at /ui/
	token string        // the local token
	hint  string        // where the token is, for a refused client
}

// localFaces is the MCP face and the local token, for startMetrics.
func (n *Node) localFaces() localFaces {
	return localFaces{mcp: n.mcpHTTP(), ui: n.webUI(), token: n.localToken, hint: n.localTokenHint()}
}
