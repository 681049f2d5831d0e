package delta_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// delta is pure: the standard library and cbor only, no goroutines, no
// clock, no randomness.
var forbiddenImports = map[string]string{
	"net":          "pure package: no network code",
	"net/http":     "pure package: no network code",
	"os":           "pure package: no files or environment",
	"os/exec":      "pure package: no processes",
	"time":         "deterministic: time is passed in",
	"math/rand":    "deterministic",
	"math/rand/v2": "deterministic",
	"crypto/rand":  "deterministic",
	"sync":         "no goroutines, so nothing to lock: one owner per value",
	"testing":      "do not use testing in production code",
	"unsafe":       "decoders see hostile input",
	"reflect":      "the cbor library does the reflection",
}

func productionFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return fset, files
}

func TestPurity(t *testing.T) {
	fset, files := productionFiles(t)
	for name, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbiddenImports[path]; bad {
				t.Errorf("%s imports %s: %s", name, path, why)
			}
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != "github.com/fxamacker/cbor/v2" {
				t.Errorf("%s imports %s: only the standard library and cbor are allowed", name, path)
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

// TestDocComments keeps every exported name documented, and the package
// documentation in doc.go.
func TestDocComments(t *testing.T) {
	_, files := productionFiles(t)
	if files["doc.go"] == nil {
		t.Error("no doc.go")
	}
	for name, f := range files {
		if f.Doc != nil && name != "doc.go" {
			t.Errorf("%s: the package comment belongs in doc.go", name)
		}
		if name == "doc.go" && (f.Doc == nil || len(f.Doc.Text()) < 2000) {
			t.Error("doc.go: missing or short package documentation")
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && (d.Recv == nil || exportedRecv(d.Recv)) {
					t.Errorf("%s: %s has no doc comment", name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
							t.Errorf("%s: type %s has no doc comment", name, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
								t.Errorf("%s: %s has no doc comment", name, n.Name)
							}
						}
					}
				}
			}
		}
	}
}

func exportedRecv(r *ast.FieldList) bool {
	typ := r.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
