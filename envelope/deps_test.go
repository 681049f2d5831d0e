package envelope_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// envelope is pure: the standard library, cbor and internal/wirecodec (the
// shared decoder configuration of peer input, itself a leaf with no network
// code) only, no goroutines.
var forbiddenImports = map[string]string{
	"net":      "pure package: no network code",
	"net/http": "pure package: no network code",
	"os":       "pure package: no files or environment",
	"os/exec":  "pure package: no processes",
	"testing":  "do not use testing in production code",
	"unsafe":   "decoders see hostile input",
	"reflect":  "the cbor library does the reflection",
}

const wirecodecPath = "github.com/nova-node/nova-node/internal/wirecodec"

func TestPurity(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbiddenImports[path]; bad {
				t.Errorf("%s imports %s: %s", name, path, why)
			}
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != "github.com/fxamacker/cbor/v2" && path != wirecodecPath {
				t.Errorf("%s imports %s: only the standard library, cbor and %s are allowed", name, path, wirecodecPath)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement at %v: the package starts no goroutines", name, fset.Position(g.Pos()))
			}
			return true
		})
	}
}
