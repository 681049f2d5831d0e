package crdt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// The store layout of a document (see Store): the state record is a
// marker, CBOR {"v": 2, "u": [signed update...]}, and the log holds one
// signed update per entry, in the order applied. A state record that is
// not such a marker, or a log entry that is not a signed update, was
// written by a version without signed updates (format 1: an unsigned
// snapshot and unsigned deltas); see load.
type storedState struct {
	V       uint8    `cbor:"v"`
	Updates [][]byte `cbor:"u,omitempty"`
}

const storeFormat = 2

func storeMarker(updates [][]byte) []byte {
	b, err := wirecodec.EncMode().Marshal(storedState{V: storeFormat, Updates: updates})
	if err != nil {
		panic(err) // a fixed struct of bytes always encodes
	}
	return b
}

var storeDec = wirecodec.NewDecMode(wirecodec.Limits{MaxNestedLevels: 4, MaxArrayElements: 1 << 20, MaxMapPairs: 16, RejectUnknownFields: true})

func readMarker(b []byte) (storedState, bool) {
	var st storedState
	if storeDec.Unmarshal(b, &st) != nil || st.V != storeFormat {
		return storedState{}, false
	}
	return st, true
}

// LegacyError refuses a document stored by a version without signed
// updates when the Manager has no way to repair it (WithLegacyRepair).
type LegacyError struct {
	Doc    string
	Reason string
}

func (e *LegacyError) Error() string {
	return fmt.Sprintf("crdt: %s: document %s is stored without signatures (%s); its content cannot be verified by peers: "+
		"configure a local agent that may write it, so the node writes it again as one signed update, or remove it from the store",
		CodeLegacyDocument, e.Doc, e.Reason)
}

// Code is CodeLegacyDocument.
func (e *LegacyError) Code() string { return CodeLegacyDocument }

// load rebuilds a document from the store: every stored signed update is
// verified again (DecodeUpdate) and applied in order. A document stored
// without signatures is repaired (WithLegacyRepair): its JSON, read from
// the unsigned state whatever its clock claims (a wedged or forged clock
// is left behind), is written again as one signed update of this node, and
// the store is rewritten in the signed format in one step. Without a
// repair agent it is refused with a *LegacyError and the store is left as
// it is.
func (m *Manager) load(name string) (*Doc, error) {
	lg, err := newDocLog(name, m.replica)
	if err != nil {
		return nil, err
	}
	d := &Doc{m: m, name: name, log: lg, watchers: map[*Watch]struct{}{}, ready: make(chan struct{}), digestNow: make(chan struct{}, 1), digestReset: make(chan struct{}, 1)}
	state, logged, err := m.store.LoadDoc(name)
	if err != nil {
		return nil, fmt.Errorf("crdt: load %s: %w", name, err)
	}
	if state == nil && len(logged) == 0 {
		return d, nil
	}
	marker, signed := readMarker(state)
	if state == nil {
		signed = true
		for _, b := range logged {
			if _, err := DecodeUpdate(b); ErrorCode(err) == CodeDeserializationFailed {
				signed = false
				break
			}
		}
	}
	if !signed {
		return m.repairLegacy(d, state, logged)
	}
	d.marked = state != nil
	skipped := 0
	for _, b := range append(marker.Updates, logged...) {
		u, err := DecodeUpdate(b)
		if err == nil {
			_, err = lg.add(u, "")
		}
		if err != nil {
			skipped++
		}
	}
	if skipped > 0 {
		m.log.Warnw("stored updates that do not verify were skipped", "doc", name, "skipped", skipped)
	}
	return d, nil
}

func (m *Manager) repairLegacy(d *Doc, state []byte, logged [][]byte) (*Doc, error) {
	old, err := delta.New(m.replica)
	if err != nil {
		return nil, err
	}
	if state != nil {
		st, err := delta.DecodeDoc(state)
		if err != nil {
			return nil, &LegacyError{Doc: d.name, Reason: "its state does not decode: " + err.Error()}
		}
		old.JoinDoc(st)
	}
	for _, b := range logged {
		if x, err := delta.DecodeDelta(b); err == nil {
			old.Join(x)
		}
	}
	content := old.JSON()
	if bytes.Equal(content, []byte("{}")) {
		if err := m.store.SaveDoc(d.name, storeMarker(nil)); err != nil {
			return nil, fmt.Errorf("crdt: rewrite %s: %w", d.name, err)
		}
		d.marked = true
		return d, nil
	}
	if m.repair == nil {
		return nil, &LegacyError{Doc: d.name, Reason: "no local agent to write it again"}
	}
	agent, ok := m.repair(d.name)
	if !ok {
		return nil, &LegacyError{Doc: d.name, Reason: "no local agent may write it"}
	}
	if m.check != nil {
		if err := m.check(d.name, agent, m.h.ID()); err != nil {
			return nil, &LegacyError{Doc: d.name, Reason: err.Error()}
		}
	}
	x, err := d.log.d.Set("", json.RawMessage(content))
	if err != nil {
		return nil, &LegacyError{Doc: d.name, Reason: err.Error()}
	}
	u, err := d.log.local(m.key, agent, x, time.Now().UnixMilli())
	if err != nil {
		return nil, &LegacyError{Doc: d.name, Reason: err.Error()}
	}
	if err := m.store.SaveDoc(d.name, storeMarker([][]byte{u.Raw})); err != nil {
		return nil, fmt.Errorf("crdt: rewrite %s: %w", d.name, err)
	}
	d.marked = true
	m.log.Infow("document stored without signatures written again as one signed update", "doc", d.name, "agent", agent)
	return d, nil
}

// refuse counts and reports an update refused from peer p.
func (m *Manager) refuse(doc string, p peer.ID, err error) {
	m.rejected.Add(1)
	code := ErrorCode(err)
	if code == "" {
		code = CodeInvalidUpdate
	}
	m.log.Debugw("update refused", "code", code, "doc", doc, "peer", p, "err", err)
	if code == CodeForgedUpdate || code == CodeInvalidUpdate {
		m.security(SecurityEvent{Code: code, Doc: doc, Peer: p, Detail: err.Error()})
	}
}

func (m *Manager) security(e SecurityEvent) {
	if m.events != nil {
		m.events(e)
	}
}
