package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/node/localapi"
)

// ApplyDocOp opens the document if needed and applies op. The operation,
// the writing agent and the document's write rule are checked first: a
// refused write leaves no document behind.
func (n *Node) ApplyDocOp(ctx context.Context, doc string, op localapi.DocOp) (localapi.DocView, error) {
	switch op.Op {
	case "set", "delete", "add", "remove", "incr":
	default:
		return localapi.DocView{}, fmt.Errorf("node: unknown document operation %q (set, delete, add, remove, incr)", op.Op)
	}
	agent := op.Agent
	if agent == "" {
		c, ok := n.defaultAgent()
		if !ok {
			return localapi.DocView{}, errors.New("node: no local agent to write as")
		}
		agent = c.ID
	}
	c, ok := n.reg.Get(agent)
	if !ok {
		return localapi.DocView{}, fmt.Errorf("node: %q is not an agent of this node", agent)
	}
	agent = c.Address()
	if err := n.docSourceCheck(doc, agent, n.id); err != nil {
		return localapi.DocView{}, err
	}
	d, err := n.docs.Open(ctx, doc)
	if err != nil {
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
	}
	var kind *crdt.KindError
	if errors.As(err, &kind) {
		err = &docError{code: localapi.CodeDocTypeMismatch, err: err}
	}
	if err != nil {
		return localapi.DocView{}, err
	}
	return n.ReadDoc(ctx, doc, op.Path)
}

// docError gives a document's error its code for the API: a
// *crdt.KindError is localapi.CodeDocTypeMismatch.
type docError struct {
	code string
	err  error
}

func (e *docError) Error() string { return e.err.Error() }
func (e *docError) Code() string  { return e.code }
func (e *docError) Unwrap() error { return e.err }

// ReadDoc returns the document's value at path ("" for all of it),
// opening the document (from the store, then the connected peers) if
// needed, and holding it from then on, as a watch does: for programs that
// follow a document from before its first write. The local API reads with
// LookupDoc.
func (n *Node) ReadDoc(ctx context.Context, doc, path string) (localapi.DocView, error) {
	d, err := n.docs.Open(ctx, doc)
	if err != nil {
		return localapi.DocView{}, err
	}
	return docView(d, doc, path), nil
}

// LookupDoc returns the document's value at path ("" for all of it), as
// `crdt get` shows it. A document this node does not hold is fetched from
// the connected peers and held from then on; one that none of them holds
// either is a *crdt.NotFoundError (localapi.CodeDocNotFound), and nothing
// is left behind: no document is stored or listed. A document the node
// holds, written or not (a watch opened it), is read as it is.
func (n *Node) LookupDoc(ctx context.Context, doc, path string) (localapi.DocView, error) {
	d, err := n.docs.Lookup(ctx, doc)
	if err != nil {
		return localapi.DocView{}, err
	}
	return docView(d, doc, path), nil
}

// ForgetDoc closes the document on this node and deletes its local copy
// (crdt.Manager.Forget): other nodes keep theirs, and opening it again
// fetches it from them.
func (n *Node) ForgetDoc(doc string) error {
	return n.docs.Forget(doc)
}

func docView(d *crdt.Doc, doc, path string) localapi.DocView {
	v := localapi.DocView{Doc: doc, Path: path, Clock: d.Clock()}
	if path == "" {
		v.Value = d.JSON()
		return v
	}
	val, ok := d.Get(path)
	if !ok {
		val = json.RawMessage("null")
	}
	v.Value = val
	if vals := d.Values(path); len(vals) > 1 {
		v.Values = vals
	}
	return v
}

// DeleteDoc removes the document's bucket (crdt.Store).
func (c crdtStore) DeleteDoc(name string) error {
	return c.s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketCRDT)
		if root == nil || root.Bucket([]byte(name)) == nil {
			return nil
		}
		return root.DeleteBucket([]byte(name))
	})
}

// docStatus is the HTTP status of a document request's error.
func docStatus(err error) int {
	if _, ok := errors.AsType[*crdt.NotFoundError](err); ok {
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

func (n *Node) registerDocRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/crdt", func(w http.ResponseWriter, r *http.Request) {
		m := n.docs
		infos := []crdt.Info{}
		for _, d := range m.Docs() {
			infos = append(infos, d.Info())
		}
		sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
		writeJSON(w, 200, infos)
	})
	mux.HandleFunc("GET /v1/crdt/{doc}", func(w http.ResponseWriter, r *http.Request) {
		v, err := n.LookupDoc(r.Context(), r.PathValue("doc"), r.URL.Query().Get("path"))
		if err != nil {
			writeJSON(w, docStatus(err), apiErr(err))
			return
		}
		writeJSON(w, 200, v)
	})
	mux.HandleFunc("DELETE /v1/crdt/{doc}", func(w http.ResponseWriter, r *http.Request) {
		doc := r.PathValue("doc")
		if err := n.ForgetDoc(doc); err != nil {
			writeJSON(w, docStatus(err), apiErr(err))
			return
		}
		writeJSON(w, 200, localapi.DocForgotten{Doc: doc, Forgotten: true})
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
		// Subscribed before the catch-up that opening sends: what it
		// brings is shown as changes.
		_, watch, err := n.docs.Watch(r.Context(), r.PathValue("doc"), 1024)
		if err != nil {
			writeJSON(w, 400, apiErr(err))
			return
		}
		defer watch.Close()
		serveNDJSON(w, ndjsonStream[crdt.Change]{next: func() (crdt.Change, bool) {
			select {
			case <-r.Context().Done():
				return crdt.Change{}, false
			case c, ok := <-watch.C:
				return c, ok
			}
		}})
	})
}
