// Package srccheck reads the Go source of the module's packages for the
// guardrail test at the module root (deps_test.go), which keeps every
// package in its layer: which imports it uses, that it starts no bare
// goroutines, that every exported name is documented. It parses every
// production file whatever its build constraints, so a rule holds on every
// platform, not only on the one running the test.
package srccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Files parses the production (non-test) Go files of the current directory,
// which is the package directory when called from its tests.
func Files(t testing.TB) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset, files, err := ParseDir(".")
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// ParseDir parses the production (non-test) Go files of dir, with their
// comments, keyed by file name.
func ParseDir(dir string) (*token.FileSet, map[string]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files[name] = f
	}
	return fset, files, nil
}

// Import is one import of one file.
type Import struct {
	File, Path string
	// Std reports a standard-library path (no dot in its first element).
	Std bool
}

// Imports lists every import of files.
func Imports(files map[string]*ast.File) []Import {
	var out []Import
	for name, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			out = append(out, Import{File: name, Path: path, Std: !strings.Contains(first, ".")})
		}
	}
	return out
}

// GoStatements returns the position of every go statement in files.
func GoStatements(fset *token.FileSet, files map[string]*ast.File) []token.Position {
	var out []token.Position
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				out = append(out, fset.Position(g.Pos()))
			}
			return true
		})
	}
	return out
}

// Undocumented returns "file: name" for every exported function, method of
// an exported type, type, variable and constant without a doc comment,
// except the function and method names in exempt.
func Undocumented(files map[string]*ast.File, exempt ...string) []string {
	var out []string
	for name, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && (d.Recv == nil || exportedRecv(d.Recv)) && !slices.Contains(exempt, d.Name.Name) {
					out = append(out, name+": "+d.Name.Name+" has no doc comment")
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
							out = append(out, name+": type "+s.Name.Name+" has no doc comment")
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
								out = append(out, name+": "+n.Name+" has no doc comment")
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	typ := r.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
