package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The e2e tests must run the binary the packages ship.
func TestReleaseTagsAreTheMakefiles(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOTAGS \?= (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no GOTAGS ?= line")
	}
	if got := string(m[1]); got != ReleaseTags {
		t.Fatalf("Makefile builds with -tags %q, the e2e tests with %q", got, ReleaseTags)
	}
}
