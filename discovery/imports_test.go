package discovery_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports: discovery reaches the rest of nova through agentcard only
// (doc.go), plus its own pure sub-package invite, home of the swarm-name
// rule; the router and the node come to it, never the reverse.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, "github.com/nova-node/nova-node/"); ok && rest != "agentcard" && rest != "discovery/invite" {
				t.Errorf("%s imports %s: discovery may import only agentcard of nova's packages", name, p)
			}
			if p == "os/exec" || p == "testing" {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}
