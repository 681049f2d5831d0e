package negotiation_test

import (
	"slices"
	"testing"

	"github.com/nova-node/nova-node/internal/srccheck"
)

// allowedImports are the non-standard imports this package may use: it
// depends on small interfaces, never on the router (protocol) or on node.
var allowedImports = []string{
	"github.com/nova-node/nova-node/agentcard", // the capability-id rule
	"github.com/nova-node/nova-node/envelope",
}

func TestImports(t *testing.T) {
	fset, files := srccheck.Files(t)
	for _, imp := range srccheck.Imports(files) {
		if !imp.Std && !slices.Contains(allowedImports, imp.Path) {
			t.Errorf("%s imports %s: allowed are the standard library and %v", imp.File, imp.Path, allowedImports)
		}
	}
	for _, pos := range srccheck.GoStatements(fset, files) {
		t.Errorf("%s: a bare go statement: start goroutines with a WaitGroup owned by a Close", pos)
	}
}

// TestDocComments keeps every exported name documented and the package
// documentation in doc.go.
func TestDocComments(t *testing.T) {
	_, files := srccheck.Files(t)
	if files["doc.go"] == nil || files["doc.go"].Doc == nil {
		t.Error("no package documentation in doc.go")
	}
	for _, p := range srccheck.Undocumented(files, "Error", "MarshalJSON") {
		t.Error(p)
	}
}
