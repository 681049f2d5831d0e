package journal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// damage flips a byte of the first occurrence of what in the journal's files.
func damage(t *testing.T, dir, what string) {
	t.Helper()
	for _, name := range []string{"journal-0", "journal-1"} {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(what)); i >= 0 {
			b[i] ^= 0xff
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%q not in the journal", what)
}
