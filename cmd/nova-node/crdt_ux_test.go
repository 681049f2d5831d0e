package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestCRDTGetUnknownDocCreatesNothing: `crdt get` of a document that
// neither the node nor a peer holds is DOC_NOT_FOUND (exit 1) with a hint,
// and leaves nothing behind: `crdt docs` lists no document, before and
// after a restart. A write refused before it is made (an unknown agent)
// creates no document either.
func TestCRDTGetUnknownDocCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"))
	_, errOut, code := runCLI(t, "crdt", "get", "nosuchdoc", "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "(DOC_NOT_FOUND)") || !strings.Contains(errOut, "hint: ") ||
		!strings.Contains(errOut, "crdt set nosuchdoc") {
		t.Errorf("crdt get nosuchdoc: exit %d, stderr %q; want DOC_NOT_FOUND with a hint", code, errOut)
	}
	out, _, code := runCLI(t, "crdt", "get", "nosuchdoc", "/a", "--data-dir", dir, "--json")
	if e := jsonError(t, out); code != 1 || e.Code != localapi.CodeDocNotFound {
		t.Errorf("crdt get --json: exit %d, %+v", code, e)
	}
	if _, errOut, code := runCLI(t, "crdt", "set", "refused", "/a", "1", "--as", "nobody", "--data-dir", dir); code != 1 {
		t.Errorf("crdt set as an unknown agent: exit %d, stderr %q", code, errOut)
	}
	if out, _, code := runCLI(t, "crdt", "docs", "--data-dir", dir); code != 0 || strings.TrimSpace(out) != "no documents" {
		t.Errorf("crdt docs after a read of an unknown document and a refused write: exit %d, %q", code, out)
	}
	n.Close()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	if out, _, code := runCLI(t, "crdt", "docs", "--data-dir", dir, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("crdt docs after a restart: exit %d, %q; want nothing stored", code, out)
	}
}

// TestCRDTForget: `crdt forget` closes a document and deletes the node's
// copy: it is no longer listed, reads are DOC_NOT_FOUND, and a restart
// does not bring it back. Forgetting it again is DOC_NOT_FOUND; --json
// prints an object.
func TestCRDTForget(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"))
	if _, errOut, code := runCLI(t, "crdt", "set", "plan", "/goal", `"ship"`, "--data-dir", dir); code != 0 {
		t.Fatalf("crdt set: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "crdt", "set", "keep", "/goal", `"stay"`, "--data-dir", dir); code != 0 {
		t.Fatalf("crdt set: exit %d, %q", code, errOut)
	}
	out, errOut, code := runCLI(t, "crdt", "forget", "plan", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "forgot plan") {
		t.Fatalf("crdt forget: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, _ = runCLI(t, "crdt", "docs", "--data-dir", dir)
	if strings.Contains(out, "plan") || !strings.Contains(out, "keep") {
		t.Errorf("crdt docs after forget: %q; want keep alone", out)
	}
	if _, errOut, code := runCLI(t, "crdt", "get", "plan", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "DOC_NOT_FOUND") {
		t.Errorf("crdt get of a forgotten document: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "crdt", "forget", "plan", "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "(DOC_NOT_FOUND)") || !strings.Contains(errOut, "crdt docs") {
		t.Errorf("crdt forget twice: exit %d, %q", code, errOut)
	}
	// Written again after it was forgotten: a new document.
	runCLI(t, "crdt", "set", "plan", "/goal", `"again"`, "--data-dir", dir)
	out, _, code = runCLI(t, "crdt", "forget", "plan", "--data-dir", dir, "--json")
	var v localapi.DocForgotten
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Doc != "plan" || !v.Forgotten {
		t.Errorf("crdt forget --json: exit %d, %q", code, out)
	}
	n.Close()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, _, _ = runCLI(t, "crdt", "docs", "--data-dir", dir)
	if strings.Contains(out, "plan") || !strings.Contains(out, "keep") {
		t.Errorf("crdt docs after a restart: %q; want keep alone", out)
	}
}

// TestCRDTAddRemoveSayWhatTheyDid: add and remove say what they did and
// how many elements the set holds (not `null` when it is empty); --json
// prints the document view, the empty set as [].
func TestCRDTAddRemoveSayWhatTheyDid(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, errOut, code := runCLI(t, "crdt", "add", "plan", "/owners", `"alice"`, "--data-dir", dir)
	if code != 0 || strings.TrimSpace(out) != `added "alice" to /owners in plan (1 element)` {
		t.Errorf("crdt add: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "crdt", "remove", "plan", "/owners", `"alice"`, "--data-dir", dir)
	if code != 0 || strings.TrimSpace(out) != `removed "alice" from /owners in plan (now empty)` {
		t.Errorf("crdt remove: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "crdt", "remove", "plan", "/owners", `"alice"`, "--data-dir", dir, "--json")
	var v localapi.DocView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Doc != "plan" || v.Path != "/owners" || string(v.Value) != "[]" {
		t.Errorf("crdt remove --json: exit %d, %q; want the document view with value []", code, out)
	}
}

// TestCRDTDocsSaysCatchingUp: while a connected peer has not answered the
// catch-up a document's opening sent, `crdt docs` says "catching up", not
// "up to date with peers".
func TestCRDTDocsSaysCatchingUp(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"))
	slow, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	release := make(chan struct{})
	defer close(release)
	asked := make(chan struct{}, 1)
	slow.SetStreamHandler(crdt.ID, func(s network.Stream) {
		asked <- struct{}{}
		<-release
		s.Reset()
	})
	if err := n.Host().Connect(t.Context(), peer.AddrInfo{ID: slow.ID(), Addrs: slow.Addrs()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-asked; cancel() }()
	if _, err := n.Docs().Open(ctx, "plan"); err != nil {
		t.Fatal(err)
	}
	out, _, code := runCLI(t, "crdt", "docs", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "catching up") || strings.Contains(out, "up to date") {
		t.Errorf("crdt docs while a peer has not answered: exit %d, %q", code, out)
	}
}
