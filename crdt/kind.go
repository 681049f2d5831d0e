package crdt

import (
	"encoding/json"
	"fmt"
)

// KindError refuses a local write that would change the kind of a path: a
// set operation (SetAdd, SetRemove) on a path that holds a value other than
// an array, or an Incr on one that holds anything but an integer. The delta
// CRDT would replace the value with the new kind (an update replaces what
// it has seen at its path), which is what Set is for. A number written with
// Set and an array written with Set read like a counter and a set, and are
// taken as such.
//
// The rule is checked under the document's lock, in the same step as the
// write: of two concurrent writers of different kinds on one path, the
// second sees what the first wrote. It applies to this node's writes only;
// updates from peers are joined as the CRDT merges them.
type KindError struct {
	Path string
	Op   string // the refused operation: "add", "remove" or "incr"
	Held string // what the path holds, e.g. "a string", "a set (array)"
}

func (e *KindError) Error() string {
	if e.Op == "remove" {
		// Nothing to remove an element from: no set is there.
		return fmt.Sprintf("%s holds %s, not a set: remove takes an element out of a set; to clear the path, delete it", e.Path, e.Held)
	}
	want := "a set"
	if e.Op == "incr" {
		want = "a counter"
	}
	return fmt.Sprintf("%s holds %s, not %s: %s would replace it; delete it first, or write it with set", e.Path, e.Held, want, e.Op)
}

// checkKindLocked returns a *KindError when op ("add", "remove" or "incr")
// may not write at path as the document holds it. d.mu must be held.
func (d *Doc) checkKindLocked(op, path string) error {
	cur, ok := d.log.d.Get(path)
	if !ok || len(cur) == 0 || string(cur) == "null" {
		return nil
	}
	var n int64
	switch {
	case (op == "add" || op == "remove") && cur[0] != '[':
	case op == "incr" && json.Unmarshal(cur, &n) != nil:
	default:
		return nil
	}
	held := "a value"
	switch cur[0] {
	case '"':
		held = "a string"
	case '{':
		held = "an object"
	case '[':
		held = "a set (array)"
	case 't', 'f':
		held = "a boolean"
	default:
		held = "a number"
	}
	return &KindError{Path: path, Op: op, Held: held}
}
