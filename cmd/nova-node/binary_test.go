package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builtBinary builds the nova-node binary once per test process, into a
// directory removed when the tests end (TestMain): the smoke, interop and
// LAN tests share it instead of linking one each.
var builtBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nova-node-test-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "nova-node")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	return bin, nil
})

// binDir is builtBinary's directory, "" until it runs.
var binDir string

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "build: " + e.err.Error() + "\n" + string(e.out) }

// novaBinary returns the path of the nova-node binary, building it on the
// first call, and fails t when the build fails.
func novaBinary(t testing.TB) string {
	t.Helper()
	bin, err := builtBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
