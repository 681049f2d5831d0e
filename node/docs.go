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
	"github.com/nova-node/nova-node/node/localapi"
)

func (n *Node) docsOrErr() (*crdt.Manager, error) {
	m := n.Docs()
	if m == nil {
		return nil, errNotStarted
	}
	return m, nil
}

// ApplyDocOp opens the document if needed and applies op.
func (n *Node) ApplyDocOp(ctx context.Context, doc string, op localapi.DocOp) (localapi.DocView, error) {
	m, err := n.docsOrErr()
	if err != nil {
		return localapi.DocView{}, err
	}
	d, err := m.Open(ctx, doc)
	if err != nil {
		return localapi.DocView{}, err
	}
	agent := op.Agent
	if agent == "" {
		local := n.reg.Local()
		sort.Slice(local, func(i, j int) bool { return local[i].ID < local[j].ID })
		if len(local) == 0 {
			return localapi.DocView{}, errors.New("node: no local agent to write as")
		}
		agent = local[0].ID
	}
	c, ok := n.reg.Get(agent)
	if !ok {
		return localapi.DocView{}, fmt.Errorf("node: %q is not an agent of this node", agent)
	}
	agent = c.Address()
	if err := checkKind(d, op); err != nil {
		return localapi.DocView{}, err
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
		return localapi.DocView{}, err
	}
	return n.ReadDoc(ctx, doc, op.Path)
}

// docError is a document error with its code for the API.
type docError struct{ code, msg string }

func (e *docError) Error() string { return e.msg }
func (e *docError) Code() string  { return e.code }

// ReadDoc returns the document's value at path ("" for all of it),
// opening the document (from the store, then the connected peers) if
// needed.
func (n *Node) ReadDoc(ctx context.Context, doc, path string) (localapi.DocView, error) {
	m, err := n.docsOrErr()
	if err != nil {
		return localapi.DocView{}, err
	}
	d, err := m.Open(ctx, doc)
	if err != nil {
		return localapi.DocView{}, err
	}

	v := localapi.DocView{Doc: doc, Path: path, Clock: d.Clock()}
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
func checkKind(d *crdt.Doc, op localapi.DocOp) error {
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
		return &docError{localapi.CodeDocTypeMismatch, fmt.Sprintf("%s holds %s, not a set: remove takes an element out of a set; to clear the path, delete it", op.Path, kind)}
	}
	return &docError{localapi.CodeDocTypeMismatch, fmt.Sprintf("%s holds %s, not %s: %s would replace it; delete it first, or write it with set", op.Path, kind, want, op.Op)}
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
		var op localapi.DocOp
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&op); err != nil {
			writeJSON(w, 400, &localapi.APIError{Code: "INVALID_REQUEST", Message: err.Error()})
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
