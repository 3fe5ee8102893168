package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	standInOnce sync.Once
	standInPath string
	standInErr  error
)

// StandIn builds the Envoy stand-in (test/envoy) once per test binary and
// returns its path.
func StandIn(t testing.TB) string {
	t.Helper()
	standInOnce.Do(func() {
		root, err := ModuleRoot()
		if err == nil {
			var dir string
			if dir, err = os.MkdirTemp("", "standin"); err == nil {
				standInPath = filepath.Join(dir, "envoy")
				cmd := exec.Command("go", "build", "-o", standInPath, "./test/envoy")
				cmd.Dir = root
				if out, berr := cmd.CombinedOutput(); berr != nil {
					err = fmt.Errorf("%v\n%s", berr, out)
				}
			}
		}
		standInErr = err
	})
	if standInErr != nil {
		t.Fatalf("building the Envoy stand-in: %v", standInErr)
	}
	return standInPath
}

// ModuleRoot is the directory of zoneproxy's go.mod.
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the testutil source")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("no go.mod at %s", root)
	}
	return root, nil
}
