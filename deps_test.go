package nova_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/srccheck"
)

// This file holds the module's guardrails, in tailscale's deptest style:
// one table, [packages], with a line per package of the module, and the
// rules every line is checked against. Adding a package is one line there;
// a package without one fails TestPackages.

const module = "github.com/nova-node/nova-node"

// layer is a package's place in the dependency direction of
// docs/architecture.md, bottom up. A package imports packages of lower
// layers, and of its own layer only those its line names in also: so
// protocol, discovery, crdt and mcpbridge never import each other, and only
// the programs import node.
type layer int

const (
	// leaf packages import nothing of ours: codecs, frames, clocks, the
	// tier and sandbox rule tables, test helpers.
	leaf layer = iota
	// model packages are values and their rules: envelopes, agent cards,
	// CRDT deltas, invite tokens.
	model
	// service packages each own one responsibility, on libp2p (protocol,
	// discovery, crdt, mcpbridge, the A2A gateway) or on small interfaces
	// (the task layer). They reach each other only through node.
	service
	// root is node, the composition root, which wires the services, with
	// the sub-packages it delegates to: its local API (node/localapi) and
	// the glue of one service group (node/tasknode), which never import
	// node.
	root
	// program packages build nodes: the CLI, the demo, the test harness.
	program
)

// pkg is one line of the table.
type pkg struct {
	layer layer
	// also lists the packages of its own layer this package may import.
	also string
	// pure packages hold rules and values, tested without sockets: no
	// network code at any depth (networkCode), no I/O (pureBad), no bare
	// go statement, and of ours they depend on pure packages only. uses lists every non-standard import a
	// pure package may use (ours and others'); empty, it uses only the
	// standard library.
	pure bool
	uses string
	// bad are imports this package must not use, package => why, on top
	// of the module-wide ones (reserved).
	bad map[string]string
	// documented packages document every exported name and keep their
	// package comment in doc.go.
	documented bool
}

// packages is every package of the module, by path below the module, with
// the rules it keeps. Paths in also and uses are ours when their first
// element has no dot.
var packages = map[string]pkg{
	"internal/wirecodec":             {layer: leaf, pure: true, uses: "github.com/fxamacker/cbor/v2"},
	"internal/frame":                 {layer: leaf, pure: true},
	"internal/jsonstr":               {layer: leaf, pure: true}, // JSON strings written as encoding/json writes them, by hand
	"internal/clock":                 {layer: leaf},
	"internal/cputime":               {layer: leaf},
	"internal/leakcheck":             {layer: leaf},
	"internal/srccheck":              {layer: leaf},
	"internal/waitfor":               {layer: leaf},                              // tests: Eventually
	"internal/localhttp":             {layer: leaf, also: "internal/secretfile"}, // the loopback HTTP listeners' Host, Origin and Content-Type guard, and their local token
	"internal/journal":               {layer: leaf},                              // the outbox's crash-safe log: memory-mapped segments
	"internal/secretfile":            {layer: leaf},                              // the data dir's owner-only files (identity key, local token): read refusing group/other bits, created once and whole
	"internal/streamscope":           {layer: leaf, also: "internal/clock"},
	"internal/streamscope/scopetest": {layer: leaf}, // test hosts with a resource manager
	"tiers":                          {layer: leaf, pure: true},
	"sandbox":                        {layer: leaf, pure: true},
	"protocol/channel":               {layer: leaf, pure: true},

	"envelope":         {layer: model, pure: true, uses: cbor + " internal/jsonstr", bad: noReflect},
	"crdt/delta":       {layer: model, pure: true, uses: cbor, bad: join(deterministic, noReflect), documented: true},
	"discovery/invite": {layer: model, pure: true, uses: cbor},
	"agentcard": {layer: model, pure: true, uses: "tiers sandbox internal/wirecodec " + libp2pValues,
		bad: map[string]string{"log": "errors are returned, not logged"}},
	"authority": {layer: model, also: "agentcard", pure: true, uses: "tiers agentcard internal/wirecodec " + libp2pValues, documented: true},

	"protocol/task/negotiation": {layer: service, pure: true, uses: "envelope agentcard internal/wirecodec", documented: true},
	"protocol/task/taskswarm": {layer: service, also: "protocol/task/negotiation", pure: true,
		uses: "envelope agentcard protocol/task/negotiation internal/wirecodec", documented: true},
	"internal/planets": {layer: service, also: "protocol/task/negotiation protocol/task/taskswarm", pure: true,
		uses: "agentcard envelope tiers protocol/task/negotiation protocol/task/taskswarm", bad: deterministic, documented: true},
	"protocol":                     {layer: service},
	"protocol/a2ahttp":             {layer: service},
	"protocol/a2ahttp/a2ahttptest": {layer: service, also: "protocol/a2ahttp"},
	"discovery":                    {layer: service},
	"crdt":                         {layer: service},
	"mcpbridge":                    {layer: service},
	"mcpbridge/mcptest":            {layer: service},
	"node/connhealth":              {layer: service, also: "protocol", documented: true}, // the router's AckState, CloseSiblings
	"node/gossiphealth":            {layer: service, documented: true},                   // GossipSub's view of a peer whose pubsub stream died while it stayed connected

	"node":          {layer: root, also: "node/localapi node/tasknode node/webui"},
	"node/localapi": {layer: root},
	"node/webui":    {layer: root, also: "node/localapi", documented: true}, // the web view: page, stream and actions on a Source, never node
	"node/tasknode": {layer: root, also: "node/localapi", documented: true}, // the task layer's glue: wires services, never node

	"cmd/nova-node": {layer: program, also: "internal/demo"},
	"internal/demo": {layer: program},
	"testnet":       {layer: program},
}

// reserved are imports only some packages may use, path => who and why;
// a path ending in "/..." covers the packages below it too.
var reserved = map[string]struct{ by, why string }{
	"testing":                     {"internal/srccheck internal/streamscope/scopetest internal/waitfor testnet", "do not use testing in production code (test helpers excepted)"},
	"unsafe":                      {"", "decoders see hostile input; no package needs it"},
	"os/exec":                     {"mcpbridge", "only the stdio MCP backends start processes"},
	"github.com/spf13/cobra/...":  {"cmd/nova-node", "the CLI is the only place that parses flags"},
	"github.com/libp2p/go-libp2p": {"node internal/streamscope/scopetest", "only the composition root (and test helpers) build a host"},
	"github.com/libp2p/go-libp2p-kad-dht/...": {"discovery", "the DHT is discovery's; the router reaches it through its Resolver"},
	"github.com/libp2p/go-libp2p-pubsub/...":  {"node protocol crdt node/gossiphealth", "node owns the one GossipSub; protocol (broadcasts) and crdt (documents) use its topics; node/gossiphealth traces its streams"},
	"github.com/a2aproject/a2a-go/...":        {"protocol/a2ahttp", "all A2A-version code lives in protocol/a2ahttp"},
	"go.etcd.io/bbolt/...":                    {"node protocol/a2ahttp", "node owns nova.db (the gateway gets its *bbolt.DB); the others persist through small interfaces"},
	module + "/node/localapi":                 {"node node/tasknode node/webui cmd/nova-node internal/demo", "the local API: node serves it (tasknode emits its event types, webui shows them), the CLI (and the demo it runs) call it"},
}

// networkCode is what a pure package must not depend on at any depth,
// path => why. libp2p's key, peer ID and signed-record packages
// (libp2pValues) are values without I/O and stay allowed.
var networkCode = map[string]string{
	"net/http":                    "HTTP",
	"os/exec":                     "processes",
	"github.com/libp2p/go-libp2p": "a libp2p host",
	"github.com/libp2p/go-libp2p/core/host/...":      "a libp2p host",
	"github.com/libp2p/go-libp2p/core/network/...":   "libp2p streams and connections",
	"github.com/libp2p/go-libp2p/core/transport/...": "libp2p transports",
	"github.com/libp2p/go-libp2p/p2p/...":            "libp2p implementations",
	"github.com/libp2p/go-libp2p-pubsub/...":         "GossipSub",
	"github.com/libp2p/go-libp2p-kad-dht/...":        "the DHT",
	"github.com/quic-go/...":                         "QUIC",
	"go.etcd.io/bbolt/...":                           "the store",
	"github.com/modelcontextprotocol/go-sdk/...":     "MCP transports",
	"github.com/a2aproject/a2a-go/...":               "A2A over HTTP",
}

const (
	cbor         = "internal/wirecodec github.com/fxamacker/cbor/v2"
	libp2pValues = "github.com/libp2p/go-libp2p/core/crypto github.com/libp2p/go-libp2p/core/peer github.com/libp2p/go-libp2p/core/record"
)

var (
	deterministic = map[string]string{
		"time":         "deterministic: time is passed in",
		"math/rand":    "deterministic",
		"math/rand/v2": "deterministic",
		"crypto/rand":  "deterministic",
		"sync":         "no goroutines, so nothing to lock: one owner per value",
	}
	noReflect = map[string]string{"reflect": "the cbor library does the reflection"}
)

// pureBad are the standard imports no pure package uses itself, besides
// networkCode.
var pureBad = map[string]string{
	"os":  "pure: no files, environment or processes; the caller does I/O",
	"net": "pure: sockets belong to the service packages",
}

func join(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// listed is what go list says about one package of the module.
type listed struct {
	ImportPath, Dir, Name string
	GoFiles               []string
	Deps                  []string
	Error                 *struct{ Err string }
}

// list runs go list on the module, offline.
func list(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,Name,GoFiles,Deps,Error", "./...")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
}

// full turns a path of the tables into an import path: ours when its first
// element has no dot.
func full(path string) string {
	if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
		return path
	}
	return module + "/" + path
}

// match reports whether path is pattern or, for "x/...", x or below it.
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func lookup[V any](m map[string]V, path string) (V, bool) {
	for pattern, v := range m {
		if match(pattern, path) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

func fields(s string) []string {
	out := strings.Fields(s)
	for i, f := range out {
		out[i] = full(f)
	}
	return out
}

// TestPackages checks every package of the module against its line in
// packages: the dependency direction, purity, reserved and forbidden
// imports, and its documentation.
func TestPackages(t *testing.T) {
	ours := map[string]pkg{}
	for path, p := range packages {
		ours[module+"/"+path] = p
	}
	for _, l := range list(t) {
		if len(l.GoFiles) == 0 {
			continue // test-only, like this root package
		}
		rel := strings.TrimPrefix(l.ImportPath, module+"/")
		p, ok := ours[l.ImportPath]
		if !ok {
			t.Errorf("%s: no line in packages (deps_test.go): give it a layer and its rules", rel)
			continue
		}
		fset, files, err := srccheck.ParseDir(l.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range srccheck.Imports(files) {
			where := rel + "/" + imp.File + " imports " + strings.TrimPrefix(imp.Path, module+"/")
			if r, ok := lookup(reserved, imp.Path); ok && !slices.Contains(fields(r.by), l.ImportPath) {
				t.Errorf("%s: %s", where, r.why)
			}
			if why, ok := p.bad[imp.Path]; ok {
				t.Errorf("%s: %s", where, why)
			}
			if to, ok := ours[imp.Path]; ok && to.layer >= p.layer && !slices.Contains(fields(p.also), imp.Path) {
				t.Errorf("%s, a %s package: dependencies point down (docs/architecture.md), a %s package imports lower layers and its also", where, to.layer, p.layer)
			}
			if strings.HasPrefix(imp.Path, module+"/") {
				if _, ok := ours[imp.Path]; !ok {
					t.Errorf("%s: no line in packages for the imported package", where)
				}
			}
			if !p.pure {
				continue
			}
			if why, ok := pureBad[imp.Path]; ok {
				t.Errorf("%s: %s", where, why)
			}
			if !imp.Std && !slices.Contains(fields(p.uses), imp.Path) {
				t.Errorf("%s: a pure package imports the standard library and its uses only (uses: %q)", where, p.uses)
			}
		}
		if p.pure {
			for _, dep := range l.Deps {
				if why, ok := lookup(networkCode, dep); ok {
					t.Errorf("%s depends on %s (%s): a pure package has no network code at any depth", rel, strings.TrimPrefix(dep, module+"/"), why)
				}
				if to, ok := ours[dep]; ok && !to.pure {
					t.Errorf("%s depends on %s, which is not pure", rel, strings.TrimPrefix(dep, module+"/"))
				}
			}
			for _, pos := range srccheck.GoStatements(fset, files) {
				t.Errorf("%s: a go statement: pure packages start no bare goroutines", pos)
			}
		}
		checkDocs(t, rel, l.Name, p, files)
	}
}

// checkDocs: every package says what it is, in a comment that starts as
// go doc expects ("Package name ..." or, for a program, "Command ...").
func checkDocs(t *testing.T, rel, name string, p pkg, files map[string]*ast.File) {
	t.Helper()
	var docs []string
	for _, file := range slices.Sorted(maps.Keys(files)) {
		f := files[file]
		if f.Doc == nil {
			continue
		}
		docs = append(docs, file)
		want := "Package " + name + " "
		if name == "main" {
			want = "Command "
		}
		if text := f.Doc.Text(); !strings.HasPrefix(text, want) {
			t.Errorf("%s/%s: the package comment starts %q, not %q", rel, file, firstLine(text), want)
		}
	}
	switch {
	case len(docs) == 0:
		t.Errorf("%s: no package comment: say what the package owns (doc.go)", rel)
	case p.documented && !slices.Equal(docs, []string{"doc.go"}):
		t.Errorf("%s: the package comment belongs in doc.go alone, found in %v", rel, docs)
	}
	if p.documented {
		for _, u := range srccheck.Undocumented(files, "Error", "MarshalJSON") {
			t.Errorf("%s/%s", rel, u)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (l layer) String() string {
	return [...]string{"leaf", "model", "service", "root", "program"}[l]
}

// TestTableIsTidy: the table's own lines are consistent, so that a slip
// in it cannot switch a rule off.
func TestTableIsTidy(t *testing.T) {
	for path, p := range packages {
		if p.layer < leaf || p.layer > program {
			t.Errorf("%s: layer %d out of range", path, p.layer)
		}
		if !p.pure && p.uses != "" {
			t.Errorf("%s: uses applies to pure packages only", path)
		}
		for _, a := range strings.Fields(p.also) {
			if to, ok := packages[a]; !ok || to.layer != p.layer {
				t.Errorf("%s: also %s: not a package of the same layer", path, a)
			}
		}
	}
}
