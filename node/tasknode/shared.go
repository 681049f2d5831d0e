package tasknode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// The shared state of a swarm is a replicated document (crdt) written by
// the coordinating node as the swarm's creator and readable, and watchable,
// on every node: `nova-node crdt get|watch <doc>`, or `nova-node swarm
// status <id>` on a node that does not coordinate it.
//
// The document is named after the swarm id ("swarm-<hex>"), prefixed with
// the creator's sandbox ("<sandbox>.swarm-<hex>") when the creator is
// sandboxed, so that the sandbox write rule lets the creator write it. Its
// layout mirrors taskswarm.Swarm's JSON, with sub-tasks and results keyed by
// sub-task id:
//
//	/id /taskDescription /creator /requiredCapabilities /thread /complexity /createdAt
//	/recruits            the agents proposed to, with their status
//	/participants        the agents holding sub-tasks
//	/subTasks/<id>       one object per sub-task (without its result)
//	/results/<id>        each completed sub-task's result
//	/sharedState         {"progress": {"completed", "total"}, ...}
//	/error               why a failed swarm failed
//	/status              recruiting, active, completing, completed or failed (written last)
//
// Only the paths whose value changed since the last publication are
// written, so a watcher sees which part moved.

// SwarmDocName returns the name of the replicated document holding the
// shared state of swarm id created by an agent of sandbox sandboxID ("" for
// none).
func SwarmDocName(sandboxID, id string) string {
	if sandboxID == "" {
		return id
	}
	return sandboxID + "." + id
}

// swarmDocs is the taskswarm.Shared of a node.
type swarmDocs struct{ ts *Service }

type docField struct {
	path string
	val  json.RawMessage
}

func swarmFields(s taskswarm.Swarm) ([]docField, error) {
	var out []docField
	add := func(path string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out = append(out, docField{path, b})
		return nil
	}
	if s.SharedState == nil {
		s.SharedState = map[string]json.RawMessage{}
	}
	for _, f := range []struct {
		path string
		v    any
	}{
		{"/id", s.ID}, {"/taskDescription", s.TaskDescription}, {"/creator", s.Creator},
		{"/requiredCapabilities", s.RequiredCapabilities}, {"/thread", s.Thread}, {"/complexity", s.Complexity},
		{"/createdAt", s.CreatedAt}, {"/recruits", s.Recruits}, {"/participants", s.Participants},
	} {
		if err := add(f.path, f.v); err != nil {
			return nil, err
		}
	}
	for _, st := range s.SubTasks {
		st.Result = nil
		if err := add("/subTasks/"+delta.JoinPath(st.ID)[1:], st); err != nil {
			return nil, err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Results)) {
		out = append(out, docField{"/results/" + delta.JoinPath(id)[1:], s.Results[id]})
	}
	if err := add("/sharedState", s.SharedState); err != nil {
		return nil, err
	}
	if err := add("/error", s.Error); err != nil {
		return nil, err
	}
	if err := add("/status", s.Status); err != nil {
		return nil, err
	}
	return out, nil
}

// Publish writes what changed in s into its document, as its creator.
func (d swarmDocs) Publish(ctx context.Context, s taskswarm.Swarm) error {
	ts := d.ts
	docs := ts.cfg.Docs
	creator, ok := ts.cfg.Registry.Get(s.Creator)
	if !ok {
		return fmt.Errorf("node: swarm %s: creator %s is not an agent of this node", s.ID, s.Creator)
	}
	name := SwarmDocName(creator.SandboxID, s.ID)
	if !crdt.ValidName(name) {
		// A sandbox name too long to prefix a swarm id: nothing to retry.
		ts.log.Warnw("swarm not shared: its document name is too long", "swarm", s.ID, "doc", name)
		return nil
	}
	doc, err := docs.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("node: open the document of swarm %s: %w", s.ID, err)
	}
	fields, err := swarmFields(s)
	if err != nil {
		return err
	}
	ts.mu.Lock()
	cache := ts.shared[s.ID]
	if cache == nil {
		cache = map[string]string{}
		ts.shared[s.ID] = cache
	}
	var todo []docField
	for _, f := range fields {
		if cache[f.path] != string(f.val) {
			todo = append(todo, f)
		}
	}
	ts.mu.Unlock()
	for _, f := range todo {
		if err := doc.Set(ctx, creator.Address(), f.path, f.val); err != nil {
			return fmt.Errorf("node: write %s of swarm %s: %w", f.path, s.ID, err)
		}
		ts.mu.Lock()
		if c := ts.shared[s.ID]; c != nil {
			c[f.path] = string(f.val)
		}
		ts.mu.Unlock()
	}
	if s.Status.Terminal() {
		ts.mu.Lock()
		delete(ts.shared, s.ID)
		ts.mu.Unlock()
	}
	return nil
}

// swarmDoc is a swarm as its document holds it.
type swarmDoc struct {
	taskswarm.Swarm
	SubTasks map[string]taskswarm.SubTask `json:"subTasks"`
}

// swarmFromDoc reads swarm id from its replicated document on this node
// (the view of a node that does not coordinate it). ok is false when the
// document holds nothing.
func (ts *Service) swarmFromDoc(ctx context.Context, id string) (taskswarm.Swarm, bool, error) {
	docs := ts.cfg.Docs
	names := []string{id}
	if !strings.Contains(id, ".") {
		for _, c := range ts.cfg.Registry.Local() {
			if c.SandboxID != "" && !slices.Contains(names, SwarmDocName(c.SandboxID, id)) {
				names = append(names, SwarmDocName(c.SandboxID, id))
			}
		}
	}
	for _, name := range names {
		if !crdt.ValidName(name) {
			continue
		}
		d, err := docs.Open(ctx, name)
		if err != nil {
			return taskswarm.Swarm{}, false, err
		}
		var sd swarmDoc
		if err := json.Unmarshal(d.JSON(), &sd); err != nil {
			return taskswarm.Swarm{}, false, fmt.Errorf("node: document %s is not a swarm: %w", name, err)
		}
		if sd.ID == "" {
			continue
		}
		s := sd.Swarm
		s.SubTasks = s.SubTasks[:0]
		keys := slices.Collect(maps.Keys(sd.SubTasks))
		slices.SortFunc(keys, compareSubTaskIDs)
		for _, k := range keys {
			st := sd.SubTasks[k]
			if r, ok := s.Results[k]; ok {
				st.Result = r
			}
			s.SubTasks = append(s.SubTasks, st)
		}
		return s, true, nil
	}
	return taskswarm.Swarm{}, false, nil
}

// compareSubTaskIDs orders "st-2" before "st-10".
func compareSubTaskIDs(a, b string) int {
	na, ea := strconv.Atoi(strings.TrimPrefix(a, "st-"))
	nb, eb := strconv.Atoi(strings.TrimPrefix(b, "st-"))
	if ea == nil && eb == nil && na != nb {
		if na < nb {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
