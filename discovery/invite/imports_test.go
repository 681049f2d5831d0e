package invite_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package pure (doc.go): the standard library and
// internal/wirecodec (the shared decoder configuration of peer input, a
// leaf with no network code) only, and no network or process access.
func TestImports(t *testing.T) {
	forbidden := map[string]string{
		"net": "no network", "net/http": "no network", "os/exec": "never", "os": "no I/O", "testing": "test code only",
	}
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
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") && p != "github.com/nova-node/nova-node/internal/wirecodec" {
				t.Errorf("%s imports %s: only the standard library and internal/wirecodec are allowed", name, p)
			}
			if why, bad := forbidden[p]; bad {
				t.Errorf("%s imports %s: %s", name, p, why)
			}
		}
	}
}
