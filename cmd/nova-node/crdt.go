package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/node/localapi"
)

func newCRDTCmd(g *globals) *cobra.Command {
	var as string
	root := &cobra.Command{
		Use:   "crdt",
		Short: "Read and write documents replicated across the swarm",
		Long: `crdt works on named JSON documents that every node of the swarm can open and
change, with no server: concurrent changes on different devices merge (CRDTs)
and every node ends with the same document. Paths are JSON Pointers:
"/tasks/t1/owner", "/tags/0"; in a name, '/' is written ~1 and '~' is ~0. A
path that is not one is a usage error (exit 2), refused before it is sent.
A node that was offline, or joins later, is current one round trip after it
connects.

  set PATH JSON      write a value (last writer wins; concurrent values kept)
  del PATH           delete a value or a subtree ("deleted PATH from DOC")
  add / remove PATH JSON   add to / remove from a set (add wins); says what
                     it did and how many elements the set holds
  incr PATH [N]      add N (default 1, negative to subtract) to a counter
  get [PATH]         print a document (DOC_NOT_FOUND, creating nothing, when
                     neither this node nor a connected peer holds it)
  forget             close a document here and delete this node's copy

A path keeps its kind: add/remove on a path that holds a value other than a
set, or incr on one that holds no integer, is refused (DOC_TYPE_MISMATCH);
delete the path first, or overwrite it with set, which replaces whatever is
there. watch prints each change with the new values of its paths, and
ends with "node stopped" when the node stops; when no node runs, or the node
is killed under it, it fails with NO_NODE (exit 1).`,
		Example: `  nova-node crdt set plan /goal '"ship v1"'
  nova-node crdt add plan /owners '"alice"'
  nova-node crdt incr plan /done
  nova-node crdt get plan
  nova-node crdt watch plan --json
  nova-node crdt docs
  nova-node crdt forget scratch`,
	}
	asFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&as, "as", "", "local agent the change is made as, which the document's write rules check (default: the node's first agent)")
		return c
	}
	op := func(use, short, kind string, nargs int, example string) *cobra.Command {
		return asFlag(&cobra.Command{
			Use:     use,
			Short:   short,
			Example: example,
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) < nargs || len(args) > nargs+1 || kind != "incr" && len(args) != nargs {
					return &exitError{code: 2, err: fmt.Errorf("usage: nova-node crdt %s", use)}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkDocPath(args[1]); err != nil {
					return err
				}
				o := localapi.DocOp{Op: kind, Path: args[1], Agent: as}
				switch kind {
				case "set", "add", "remove":
					if !json.Valid([]byte(args[2])) {
						return &exitError{code: 2, err: fmt.Errorf("%s is not valid JSON (quote strings: '\"text\"')", args[2])}
					}
					o.Value = json.RawMessage(args[2])
				case "incr":
					o.By = 1
					if len(args) == 3 {
						n, err := strconv.ParseInt(args[2], 10, 64)
						if err != nil {
							return &exitError{code: 2, err: fmt.Errorf("%q is not an integer", args[2])}
						}
						o.By = n
					}
				}
				cl, err := g.client()
				if err != nil {
					return err
				}
				v, err := cl.ApplyDocOp(cmd.Context(), args[0], o)
				if err != nil {
					if codeOf(err, 1) == localapi.CodeDocTypeMismatch {
						return &exitError{code: 1, err: err, hint: fmt.Sprintf("`nova-node crdt get %s %s` shows what is there; "+
							"`nova-node crdt del %s %s` clears it for a new kind", args[0], args[1], args[0], args[1])}
					}
					return err
				}
				if kind == "delete" && !g.json {
					fmt.Fprintf(g.stdout, "deleted %s from %s\n", args[1], args[0])
					return nil
				}
				if kind == "add" || kind == "remove" {
					return printSetChange(g, kind, args, v)
				}
				return printDocView(g, v)
			},
		})
	}
	root.AddCommand(
		op("set DOC PATH JSON", "Write a JSON value at a path (replacing whatever is there)", "set", 3,
			"  nova-node crdt set plan /goal '\"ship v1\"'\n  nova-node crdt set plan /limits '{\"cpu\": 2, \"ram\": \"4G\"}' --as alice"),
		op("del DOC PATH", "Delete a path and everything below it", "delete", 2,
			"  nova-node crdt del plan /limits\n  nova-node crdt del plan /owners --as alice"),
		op("add DOC PATH JSON", "Add an element to the set at a path", "add", 3,
			"  nova-node crdt add plan /owners '\"alice\"'\n  nova-node crdt add plan /tags '{\"name\": \"urgent\"}'"),
		op("remove DOC PATH JSON", "Remove an element from the set at a path", "remove", 3,
			"  nova-node crdt remove plan /owners '\"alice\"'"),
		op("incr DOC PATH [N]", "Add N (default 1) to the counter at a path", "incr", 2,
			"  nova-node crdt incr plan /done\n  nova-node crdt incr plan /open -1"),
		&cobra.Command{
			Use:   "get DOC [PATH]",
			Short: "Print a document, or the value at a path",
			Long: `get prints a document (or the value at a JSON Pointer path in it). A document
this node does not hold yet is fetched from the connected peers and held from then
on (it is listed by ` + "`nova-node crdt docs`" + ` and kept in sync). A document that
neither this node nor its connected peers hold is DOC_NOT_FOUND (exit 1), and
nothing is created: ` + "`crdt set`" + ` creates a document, ` + "`crdt watch`" + ` waits for
its first write.`,
			Example: "  nova-node crdt get plan\n  nova-node crdt get plan /owners --json\n  nova-node crdt get swarm-3f2a... /status",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) < 1 || len(args) > 2 {
					return &exitError{code: 2, err: fmt.Errorf("usage: nova-node crdt get DOC [PATH]")}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				path := ""
				if len(args) == 2 {
					path = args[1]
					if err := checkDocPath(path); err != nil {
						return err
					}
				}
				cl, err := g.client()
				if err != nil {
					return err
				}
				v, err := cl.ReadDoc(cmd.Context(), args[0], path)
				if codeOf(err, 1) == localapi.CodeDocNotFound {
					return &exitError{code: 1, err: err, hint: fmt.Sprintf("`nova-node crdt set %s PATH JSON` creates it; "+
						"`nova-node crdt watch %s` waits for its first write; `nova-node crdt docs` lists the documents this node holds", args[0], args[0])}
				}
				if err != nil {
					return err
				}
				return printDocView(g, v)
			},
		},
		&cobra.Command{
			Use:   "forget DOC",
			Short: "Close a document on this node and delete its local copy",
			Long: `forget closes a document on this node: its watches end, the node stops
following it and deletes what it stored of it, and ` + "`nova-node crdt docs`" + ` no
longer lists it. The other nodes keep their copies: reading, writing or
watching it again fetches it from them. A document this node does not hold
is DOC_NOT_FOUND (exit 1).`,
			Example: "  nova-node crdt forget scratch\n  nova-node crdt forget plan --json",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return &exitError{code: 2, err: fmt.Errorf("usage: nova-node crdt forget DOC")}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				v, err := cl.ForgetDoc(cmd.Context(), args[0])
				if codeOf(err, 1) == localapi.CodeDocNotFound {
					return &exitError{code: 1, err: err, hint: "`nova-node crdt docs` lists the documents this node holds"}
				}
				if err != nil {
					return err
				}
				if g.json {
					return g.printJSON(v)
				}
				fmt.Fprintf(g.stdout, "forgot %s on this node (other nodes keep their copies)\n", args[0])
				return nil
			},
		},
		&cobra.Command{
			Use:   "watch DOC",
			Short: "Print every change of a document as it happens (Ctrl-C to stop)",
			Long: `watch prints each change of a document as it happens: local or remote, who
made it, and each changed path with its new value (null: deleted). With
--json, one object per change: the change and "values", path to value. It
runs until Ctrl-C, or until the node stops ("node stopped", exit 0). With no
node running, or when the node is killed under it (the stream breaks off), it
fails with NO_NODE (exit 1).`,
			Example: "  nova-node crdt watch plan\n  nova-node crdt watch swarm-3f2a... --json | jq .values",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return &exitError{code: 2, err: fmt.Errorf("usage: nova-node crdt watch DOC")}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				enc := json.NewEncoder(g.stdout)
				err = cl.WatchDoc(cmd.Context(), args[0], func(c crdt.Change) error {
					// The values as they are now (a later change may
					// have moved them on already).
					values := map[string]json.RawMessage{}
					for _, p := range c.Paths {
						v, err := cl.ReadDoc(cmd.Context(), c.Doc, p)
						if errors.Is(err, localapi.ErrNoNode) {
							// The node stopped after sending the change:
							// the watch ends as the stream would have.
							return errWatchNodeGone
						}
						if err != nil {
							return err
						}
						values[p] = v.Value
					}
					if g.json {
						return enc.Encode(struct {
							crdt.Change
							Values map[string]json.RawMessage `json:"values"`
						}{c, values})
					}
					where := "local"
					if c.Remote {
						where = "remote"
					}
					var parts []string
					for _, p := range c.Paths {
						parts = append(parts, p+" = "+string(values[p]))
					}
					_, err := fmt.Fprintf(g.stdout, "%s %s by %s: %s\n", c.Doc, where, shortAddr(c.Source), strings.Join(parts, ", "))
					return err
				})
				if errors.Is(err, errWatchNodeGone) {
					err = nil
				}
				if err == nil && cmd.Context().Err() == nil {
					// The stream ended without Ctrl-C: the node stopped.
					if g.json {
						fmt.Fprintf(g.stdout, "%s\n", marshal(map[string]string{"type": "node-stopped", "doc": args[0]}))
					} else {
						fmt.Fprintln(g.stdout, "node stopped")
					}
				}
				return err
			},
		},
		&cobra.Command{
			Use:     "docs",
			Short:   "List the documents this node holds, with their vector clocks",
			Example: "  nova-node crdt docs\n  nova-node crdt docs --json",
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				docs, err := cl.Docs(cmd.Context())
				if err != nil {
					return err
				}
				if g.json {
					return g.printJSON(docs)
				}
				if len(docs) == 0 {
					fmt.Fprintln(g.stdout, "no documents")
				}
				for _, d := range docs {
					var clock []string
					for r, n := range d.Clock {
						clock = append(clock, fmt.Sprintf("%s:%d", shortAddr("x@" + r)[2:], n))
					}
					sort.Strings(clock)
					behind := "  up to date with peers"
					switch {
					case d.Held > 0:
						behind = fmt.Sprintf("  peers are ahead (%d updates wait for a catch-up)", d.Held)
					case d.PeersAhead:
						behind = "  peers are ahead (catching up)"
					case d.CatchingUp:
						behind = "  catching up (a peer has not answered yet)"
					case d.Peers == 0:
						behind = "  no peer has it open"
					}
					fmt.Fprintf(g.stdout, "%-20s %d paths  %d peers  clock %s%s\n", d.Name, d.Paths, d.Peers, strings.Join(clock, " "), behind)
				}
				return nil
			},
		},
	)
	return root
}

// printSetChange prints what add or remove did: the element, the set and
// how many elements it holds now. With --json, the document view, whose
// value is the set ([] when it is empty).
func printSetChange(g *globals, kind string, args []string, v localapi.DocView) error {
	var elems []json.RawMessage
	if string(v.Value) != "null" {
		if err := json.Unmarshal(v.Value, &elems); err != nil {
			return printDocView(g, v) // not a set: a concurrent write replaced it
		}
	}
	if g.json {
		if elems == nil {
			v.Value = json.RawMessage("[]")
		}
		return g.printJSON(v)
	}
	verb, prep := "added", "to"
	if kind == "remove" {
		verb, prep = "removed", "from"
	}
	left := fmt.Sprintf("%d elements", len(elems))
	switch len(elems) {
	case 0:
		left = "now empty"
	case 1:
		left = "1 element"
	}
	fmt.Fprintf(g.stdout, "%s %s %s %s in %s (%s)\n", verb, args[2], prep, args[1], args[0], left)
	return nil
}

func printDocView(g *globals, v localapi.DocView) error {
	if g.json {
		return g.printJSON(v)
	}
	fmt.Fprintln(g.stdout, indentJSON(v.Value))
	if len(v.Values) > 1 {
		fmt.Fprintf(g.stdout, "(%d concurrent values; shown: the last writer's)\n", len(v.Values))
	}
	return nil
}

// errWatchNodeGone ends `crdt watch` when the node stopped between a
// change and the read of its values.
var errWatchNodeGone = errors.New("the node stopped")

// docPathHint says how to write a document path.
const docPathHint = "paths are JSON Pointers: /goal, /tasks/t1/owner, /tags/0; in a name, write '/' as ~1 and '~' as ~0 (\"a/b\" is /a~1b)"

// checkDocPath refuses, as a usage error, a path that is no JSON Pointer
// (the documents' own parser decides), before anything is sent.
func checkDocPath(p string) error {
	if _, err := delta.SplitPath(p); err != nil {
		// "delta: invalid path "goal": must be empty or start with '/'"
		return usageHint(strings.TrimPrefix(err.Error(), "delta: "), docPathHint)
	}
	return nil
}
