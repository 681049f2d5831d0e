package planets_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPurePackage: data and pure functions only: no goroutines, no I/O, no
// clock or randomness, and no dependency on node or the router.
func TestPurePackage(t *testing.T) {
	forbidden := map[string]bool{
		"os": true, "net": true, "net/http": true, "time": true, "math/rand": true, "math/rand/v2": true,
		"crypto/rand": true, "sync": true, "github.com/nova-node/nova-node/node": true,
		"github.com/nova-node/nova-node/protocol": true,
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	hasDoc := false
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		hasDoc = hasDoc || name == "doc.go" && f.Doc != nil
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbidden[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement: this package starts no goroutines", name)
			}
			return true
		})
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && d.Name.Name != "Error" {
					t.Errorf("%s: %s has no doc comment", name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.IsExported() && d.Doc == nil && ts.Doc == nil {
						t.Errorf("%s: type %s has no doc comment", name, ts.Name.Name)
					}
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							if n.IsExported() && d.Doc == nil && vs.Doc == nil && vs.Comment == nil {
								t.Errorf("%s: %s has no doc comment", name, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if !hasDoc {
		t.Error("no package documentation in doc.go")
	}
}
