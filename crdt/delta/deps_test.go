package delta_test

import (
	"testing"

	"github.com/nova-node/nova-node/internal/srccheck"
)

// delta is pure: the standard library, cbor and internal/wirecodec (the
// shared decoder configuration of peer input, a leaf with no network code)
// only, no goroutines, no clock, no randomness.
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

func TestPurity(t *testing.T) {
	fset, files := srccheck.Files(t)
	for _, imp := range srccheck.Imports(files) {
		if why, bad := forbiddenImports[imp.Path]; bad {
			t.Errorf("%s imports %s: %s", imp.File, imp.Path, why)
		}
		if !imp.Std && imp.Path != "github.com/fxamacker/cbor/v2" && imp.Path != "github.com/nova-node/nova-node/internal/wirecodec" {
			t.Errorf("%s imports %s: only the standard library, cbor and internal/wirecodec are allowed", imp.File, imp.Path)
		}
	}
	for _, pos := range srccheck.GoStatements(fset, files) {
		t.Errorf("go statement at %v: the package starts no goroutines", pos)
	}
}

// TestDocComments keeps every exported name documented, and the package
// documentation in doc.go.
func TestDocComments(t *testing.T) {
	_, files := srccheck.Files(t)
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
	}
	for _, p := range srccheck.Undocumented(files) {
		t.Error(p)
	}
}
