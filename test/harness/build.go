// Package harness runs the real zoneproxy binary against the test control
// plane and the Envoy stand-in, and awaits what a user would observe.
package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Binaries are the built executables the tests run.
type Binaries struct {
	Dir       string
	Zoneproxy string
	Envoy     string
}

// ReleaseTags are the build tags of the shipped binary (the Makefile's
// GOTAGS); the tests run the binary the packages ship.
const ReleaseTags = "grpcnotrace"

// Build compiles zoneproxy and the Envoy stand-in (binary name "envoy")
// into dir. Call it once from TestMain.
func Build(dir string) (Binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Dir: dir, Zoneproxy: filepath.Join(dir, "zoneproxy"), Envoy: filepath.Join(dir, "envoy")}
	for out, pkg := range map[string]string{b.Zoneproxy: "./cmd/zoneproxy", b.Envoy: "./test/envoy"} {
		cmd := exec.Command("go", "build", "-tags", ReleaseTags, "-o", out, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

func moduleRoot() (string, error) { return testutil.ModuleRoot() }

// StandIn builds the Envoy stand-in once per test binary and returns its
// path; packages' tests use it to check a bootstrap or run Envoy's part.
func StandIn(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the Envoy stand-in")
	}
	return testutil.StandIn(t)
}

// BuildZoneproxy builds the agent into out as a release of version: a
// package upgrade of the agent alone.
func BuildZoneproxy(out, version string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-tags", ReleaseTags, "-ldflags", "-X github.com/zoneproxy/zoneproxy/pkg/version.Version="+version, "-o", out, "./cmd/zoneproxy")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/zoneproxy (version %s): %v\n%s", version, err, msg)
	}
	return nil
}
