package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the node mounts the Server at.
const Prefix = "/ui/"

// Source is what the page shows and acts on: the node, through the same
// methods its local API calls, so that an action from the page keeps the
// rules and error codes of the CLI. Its methods must be safe for
// concurrent use.
type Source interface {
	// Snapshot is the node's state now.
	Snapshot() Snapshot
	// Metrics are the node's counters now.
	Metrics() localapi.Metrics
	// Recent returns up to limit of the node's last events, oldest first.
	Recent(limit int) []localapi.Event
	// Subscribe returns the node's events as they happen, and a channel
	// that receives something whenever a peer connects or disconnects
	// (nil if there is none), until stop is called. Neither channel may
	// block the node: a slow page misses events, never stalls them.
	Subscribe() (events <-chan localapi.Event, changes <-chan any, stop func())
	// Send carries out a send as `nova-node send` does.
	Send(ctx context.Context, req localapi.SendRequest) localapi.SendResult
	// Propose proposes a task as `nova-node tasks propose` does, and
	// returns the proposal's record.
	Propose(ctx context.Context, req localapi.ProposeRequest) (any, error)
	// ReadDoc and ApplyDocOp read and change a shared document as
	// `nova-node crdt get` and `crdt set` do.
	ReadDoc(ctx context.Context, doc, path string) (localapi.DocView, error)
	ApplyDocOp(ctx context.Context, doc string, op localapi.DocOp) (localapi.DocView, error)
}

// Snapshot is the node's state as the page shows it.
type Snapshot struct {
	Self     Self                   `json:"self"`
	Peers    []Peer                 `json:"peers"`
	Agents   []Agent                `json:"agents"`
	Channels []protocol.ChannelInfo `json:"channels"`
	// Swarms are the task swarms this node coordinates, as `swarm
	// status` shows them (taskswarm.Swarm values).
	Swarms []json.RawMessage `json:"swarms"`
	// Docs are the shared documents this node holds (crdt.Info values).
	Docs    []json.RawMessage `json:"docs"`
	Metrics localapi.Metrics  `json:"metrics"`
}

// Self is this node.
type Self struct {
	PeerID  string   `json:"peerId"`
	Version string   `json:"version"`
	Swarm   string   `json:"swarm"`
	Addrs   []string `json:"addrs"`
}

// Peer is one connected peer.
type Peer struct {
	PeerID  string   `json:"peerId"`
	Addrs   []string `json:"addrs"`
	Relayed bool     `json:"relayed"`
	// LatencyMs is the smoothed round-trip time to the peer, 0 when not
	// measured yet.
	LatencyMs float64 `json:"latencyMs"`
	// Basis and Expires are as localapi.PeerStatus has them.
	Basis   string    `json:"basis,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// Agent is one agent, local or remote, with its standing on this node.
type Agent struct {
	Address string `json:"address"`
	Name    string `json:"name"`
	// Host is the hosting node's peer ID.
	Host string `json:"host,omitempty"`
	// Tier is the effective tier; ClaimedTier what its card claims.
	Tier        int    `json:"tier"`
	ClaimedTier int    `json:"claimedTier"`
	Sandbox     string `json:"sandbox,omitempty"`
	// Basis is on what ground the tier and sandbox stand (local, grant,
	// trust, none, claim); Grant names the grant; Expires is when the
	// basis ends (zero: never); Note says why the effective tier or
	// sandbox differs from the claim.
	Basis        string    `json:"basis"`
	Grant        string    `json:"grant,omitempty"`
	Expires      time.Time `json:"expires,omitzero"`
	Note         string    `json:"note,omitempty"`
	Capabilities []string  `json:"capabilities"`
}

// Options tune a Server; the zero value gives the defaults.
type Options struct {
	// Tick is how often a stream sends a metrics sample and, when the
	// node's state changed, a snapshot. Default 1 s.
	Tick time.Duration
	// Coalesce is how long a stream gathers events and peer changes
	// before it sends a snapshot. Default 100 ms.
	Coalesce time.Duration
}

// Server serves the page and its API. Close ends its streams.
type Server struct {
	src  Source
	opt  Options
	mux  *http.ServeMux
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	samples []Sample // the last historyLen, oldest first
}

// historyLen is how many metrics samples the page gets when it connects:
// five minutes at the default tick.
const historyLen = 300

// Sample is the node's counters at one instant, for the page's charts.
type Sample struct {
	TimeMs       int64   `json:"t"`
	Sent         uint64  `json:"sent"`
	Received     uint64  `json:"received"`
	Errors       uint64  `json:"errors"`
	Security     uint64  `json:"security"`
	AvgLatencyMs float64 `json:"latencyMs"`
}

// New returns a Server of src.
func New(src Source, opt Options) *Server {
	if opt.Tick <= 0 {
		opt.Tick = time.Second
	}
	if opt.Coalesce <= 0 {
		opt.Coalesce = 100 * time.Millisecond
	}
	s := &Server{src: src, opt: opt, mux: http.NewServeMux(), done: make(chan struct{})}
	static, _ := fs.Sub(assets, "assets") // cannot fail: the directory is embedded
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(static))
	s.mux.Handle("GET /ui/{$}", files)
	s.mux.Handle("GET /ui/app.js", files)
	s.mux.Handle("GET /ui/app.css", files)
	s.mux.HandleFunc("GET /ui/api/stream", s.stream)
	s.mux.HandleFunc("POST /ui/api/send", s.send)
	s.mux.HandleFunc("POST /ui/api/tasks", s.propose)
	s.mux.HandleFunc("GET /ui/api/docs/{doc}", s.readDoc)
	s.mux.HandleFunc("POST /ui/api/docs/{doc}", s.setDoc)
	return s
}

// Public reports whether r asks for the page itself (its HTML, CSS or
// JavaScript), which carries no data: a browser loads it without the
// local token, which the page then sends with each of its API requests.
// Every other request under Prefix needs the token.
func Public(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/ui", "/ui/", "/ui/app.js", "/ui/app.css":
		return true
	}
	return false
}

// ServeHTTP serves the page and its API, with headers that keep other
// pages from framing it and it from loading anything from elsewhere.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// Close ends the streams in progress (their handlers return, so the HTTP
// server's shutdown need not wait for them). It is idempotent.
func (s *Server) Close() { s.once.Do(func() { close(s.done) }) }

// maxAction bounds an action's JSON body: a send's payload included.
const maxAction = localapi.MaxSendRequest

// codeInvalidRequest is the local API's code of a malformed request body.
const codeInvalidRequest = "INVALID_REQUEST"

// decode reads r's JSON body into v, or answers 400 INVALID_REQUEST.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAction)).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return true
	}
	writeJSON(w, http.StatusBadRequest, &localapi.APIError{Code: codeInvalidRequest, Message: "request body: " + err.Error()})
	return false
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var req localapi.SendRequest
	if !decode(w, r, &req) {
		return
	}
	// 200 with the error inside, as the local API answers a send: the
	// page shows the result's code either way.
	writeJSON(w, http.StatusOK, s.src.Send(r.Context(), req))
}

func (s *Server) propose(w http.ResponseWriter, r *http.Request) {
	var req localapi.ProposeRequest
	if !decode(w, r, &req) {
		return
	}
	rec, err := s.src.Propose(r.Context(), req)
	writeResult(w, rec, err)
}

func (s *Server) readDoc(w http.ResponseWriter, r *http.Request) {
	v, err := s.src.ReadDoc(r.Context(), r.PathValue("doc"), r.URL.Query().Get("path"))
	writeResult(w, v, err)
}

func (s *Server) setDoc(w http.ResponseWriter, r *http.Request) {
	var op localapi.DocOp
	if !decode(w, r, &op) {
		return
	}
	v, err := s.src.ApplyDocOp(r.Context(), r.PathValue("doc"), op)
	writeResult(w, v, err)
}

// writeResult answers v, or err as a localapi.APIError with its code
// (400: the node refused the action).
func writeResult(w http.ResponseWriter, v any, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, v)
		return
	}
	var ae *localapi.APIError
	if !errors.As(err, &ae) {
		ae = &localapi.APIError{Code: protocol.CodeOf(err), Message: err.Error()}
	}
	writeJSON(w, http.StatusBadRequest, ae)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
