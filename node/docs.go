package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/nova-node/nova-node/crdt"
)

// DocOp is one change to a replicated document through the local API.
type DocOp struct {
	Op    string          `json:"op"` // set, delete, add, remove, incr
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
	By    int64           `json:"by,omitempty"`
	Agent string          `json:"agent,omitempty"` // default: the node's first agent
}

// DocView is a document's content at a path.
type DocView struct {
	Doc    string            `json:"doc"`
	Path   string            `json:"path"`
	Value  json.RawMessage   `json:"value"`
	Values []json.RawMessage `json:"values,omitempty"` // every concurrent value, winner first
	Clock  map[string]uint64 `json:"clock"`
}

func (n *Node) docsOrErr() (*crdt.Manager, error) {
	m := n.Docs()
	if m == nil {
		return nil, errNotStarted
	}
	return m, nil
}

// ApplyDocOp opens the document if needed and applies op.
func (n *Node) ApplyDocOp(ctx context.Context, doc string, op DocOp) (DocView, error) {
	m, err := n.docsOrErr()
	if err != nil {
		return DocView{}, err
	}
	d, err := m.Open(ctx, doc)
	if err != nil {
		return DocView{}, err
	}
	agent := op.Agent
	if agent == "" {
		local := n.reg.Local()
		sort.Slice(local, func(i, j int) bool { return local[i].ID < local[j].ID })
		if len(local) == 0 {
			return DocView{}, errors.New("node: no local agent to write as")
		}
		agent = local[0].ID
	}
	c, ok := n.reg.Get(agent)
	if !ok {
		return DocView{}, fmt.Errorf("node: %q is not an agent of this node", agent)
	}
	agent = c.Address()
	if err := checkKind(d, op); err != nil {
		return DocView{}, err
	}
	switch op.Op {
	case "set":
		err = d.Set(ctx, agent, op.Path, op.Value)
	case "delete":
		err = d.Delete(ctx, agent, op.Path)
	case "add":
		err = d.SetAdd(ctx, agent, op.Path, op.Value)
	case "remove":
		err = d.SetRemove(ctx, agent, op.Path, op.Value)
	case "incr":
		err = d.Incr(ctx, agent, op.Path, op.By)
	default:
		err = fmt.Errorf("node: unknown document operation %q (set, delete, add, remove, incr)", op.Op)
	}
	if err != nil {
		return DocView{}, err
	}
	return n.ReadDoc(ctx, doc, op.Path)
}

// CodeDocTypeMismatch: a set or counter operation on a path that holds
// another kind of value.
const CodeDocTypeMismatch = "DOC_TYPE_MISMATCH"

type docError struct{ code, msg string }

func (e *docError) Error() string { return e.msg }
func (e *docError) Code() string  { return e.code }

// ReadDoc returns the document's value at path ("" for all of it),
// opening the document (from the store, then the connected peers) if
// needed.
func (n *Node) ReadDoc(ctx context.Context, doc, path string) (DocView, error) {
	m, err := n.docsOrErr()
	if err != nil {
		return DocView{}, err
	}
	d, err := m.Open(ctx, doc)
	if err != nil {
		return DocView{}, err
	}

	v := DocView{Doc: doc, Path: path, Clock: d.Clock()}
	if path == "" {
		v.Value = d.JSON()
		return v, nil
	}
	val, ok := d.Get(path)
	if !ok {
		val = json.RawMessage("null")
	}
	v.Value = val
	if vals := d.Values(path); len(vals) > 1 {
		v.Values = vals
	}
	return v, nil
}

// checkKind refuses a set operation (add, remove) on a path that holds a
// value other than an array, and an incr on one that holds anything but an
// integer: the CRDT would replace the value with the new kind (an update
// replaces what it has seen at its path), which is what set is for. A
// number written with set and an array written with set read like a
// counter and a set, and are replaced.
func checkKind(d *crdt.Doc, op DocOp) error {
	cur, ok := d.Get(op.Path)
	if !ok || len(cur) == 0 || string(cur) == "null" {
		return nil
	}
	kind := "a value"
	switch cur[0] {
	case '"':
		kind = "a string"
	case '{':
		kind = "an object"
	case '[':
		kind = "a set (array)"
	case 't', 'f':
		kind = "a boolean"
	default:
		kind = "a number"
	}
	var n int64
	switch {
	case (op.Op == "add" || op.Op == "remove") && cur[0] != '[':
	case op.Op == "incr" && json.Unmarshal(cur, &n) != nil:
	default:
		return nil
	}
	want := "a set"
	if op.Op == "incr" {
		want = "a counter"
	}
	if op.Op == "remove" {
		// Nothing to remove an element from: no set is there.
		return &docError{CodeDocTypeMismatch, fmt.Sprintf("%s holds %s, not a set: remove takes an element out of a set; to clear the path, delete it", op.Path, kind)}
	}
	return &docError{CodeDocTypeMismatch, fmt.Sprintf("%s holds %s, not %s: %s would replace it; delete it first, or write it with set", op.Path, kind, want, op.Op)}
}

func (n *Node) registerDocRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/crdt", func(w http.ResponseWriter, r *http.Request) {
		m, err := n.docsOrErr()
		if err != nil {
			writeJSON(w, 503, apiErr(err))
			return
		}
		infos := []crdt.Info{}
		for _, d := range m.Docs() {
			infos = append(infos, d.Info())
		}
		sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
		writeJSON(w, 200, infos)
	})
	mux.HandleFunc("GET /v1/crdt/{doc}", func(w http.ResponseWriter, r *http.Request) {
		v, err := n.ReadDoc(r.Context(), r.PathValue("doc"), r.URL.Query().Get("path"))
		if err != nil {
			writeJSON(w, 400, apiErr(err))
			return
		}
		writeJSON(w, 200, v)
	})
	mux.HandleFunc("POST /v1/crdt/{doc}", func(w http.ResponseWriter, r *http.Request) {
		var op DocOp
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&op); err != nil {
			writeJSON(w, 400, &APIError{Code: "INVALID_REQUEST", Message: err.Error()})
			return
		}
		v, err := n.ApplyDocOp(r.Context(), r.PathValue("doc"), op)
		if err != nil {
			writeJSON(w, 400, apiErr(err))
			return
		}
		writeJSON(w, 200, v)
	})
	mux.HandleFunc("GET /v1/crdt/{doc}/watch", func(w http.ResponseWriter, r *http.Request) {
		m, err := n.docsOrErr()
		if err != nil {
			writeJSON(w, 503, apiErr(err))
			return
		}
		d, err := m.Open(r.Context(), r.PathValue("doc"))
		if err != nil {
			writeJSON(w, 400, apiErr(err))
			return
		}
		watch := d.Watch(1024)
		defer watch.Close()
		w.Header().Set("Content-Type", "application/x-ndjson")
		fl, _ := w.(http.Flusher)
		if fl != nil {
			fl.Flush()
		}
		enc := json.NewEncoder(w)
		for {
			select {
			case <-r.Context().Done():
				return
			case c, ok := <-watch.C:
				if !ok {
					return
				}
				if enc.Encode(c) != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			}
		}
	})
}

// Docs lists the node's open documents.
func (c *Client) Docs(ctx context.Context) ([]crdt.Info, error) {
	var v []crdt.Info
	return v, c.do(ctx, "GET", "/v1/crdt", nil, &v)
}

// ReadDoc reads a document at path.
func (c *Client) ReadDoc(ctx context.Context, doc, path string) (DocView, error) {
	var v DocView
	return v, c.do(ctx, "GET", "/v1/crdt/"+doc+"?path="+urlQueryEscape(path), nil, &v)
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

// docStreamBrokenError is a watch stream cut off without the node saying
// it stops: a [streamBrokenError] (an [ErrNoNode] when the connection
// ended mid-stream) that names the document's stream.
type docStreamBrokenError struct {
	doc string
	streamBrokenError
}

func (e *docStreamBrokenError) Error() string {
	return fmt.Sprintf("node: the watch stream of %q from %s broke off (was the node killed?): %v", e.doc, e.path, e.err)
}

func (e *docStreamBrokenError) Unwrap() []error { return e.streamBrokenError.Unwrap() }
