package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// fakeEnvoy answers --version with build and appends a line to runs each time.
func fakeEnvoy(t *testing.T, build string) (path, runs string) {
	dir := t.TempDir()
	path, runs = filepath.Join(dir, "envoy"), filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho run >> '" + runs + "'\nprintf 'envoy  version: " + build + "\\n'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, runs
}

func countRuns(t *testing.T, runs string) int {
	b, err := os.ReadFile(runs)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// check and bootstrap take the version run recorded in the state dir for
// this very binary, and never write one themselves.
func TestEnvoyReadsTheStateDirsVersionCache(t *testing.T) {
	ctx := context.Background()
	path, runs := fakeEnvoy(t, "50ef0945/1.39.0/Clean/RELEASE/BoringSSL")
	state := filepath.Join(t.TempDir(), "state")

	found, err := Envoy(ctx, path, state)
	if err != nil || found.Cached || found.Version.Version != "1.39.0" || found.Path != path || countRuns(t, runs) != 1 {
		t.Fatalf("nothing recorded: %+v, %v, %d runs; want 1.39.0 from one run", found, err, countRuns(t, runs))
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("check created the state dir (%v): it may run as another user than the service", err)
	}

	// What run records.
	if _, err := (envoy.VersionCache{Dir: state}).Read(ctx, path); err != nil {
		t.Fatal(err)
	}
	found, err = Envoy(ctx, path, state)
	if err != nil || !found.Cached || found.Version.Version != "1.39.0" || countRuns(t, runs) != 2 {
		t.Fatalf("recorded: %+v, %v, %d runs; want the cached 1.39.0 and no new run", found, err, countRuns(t, runs))
	}
}

func TestEnvoyUnreadableVersionIsAWarning(t *testing.T) {
	path, _ := fakeEnvoy(t, "garbage")
	found, err := Envoy(context.Background(), path, "")
	if err != nil || found.Unread == nil || found.Version.Version != "unknown" {
		t.Fatalf("%+v, %v; want a warning and version unknown", found, err)
	}
}

func TestEnvoyMissingBinaryFails(t *testing.T) {
	if _, err := Envoy(context.Background(), filepath.Join(t.TempDir(), "envoy"), ""); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err %v", err)
	}
}
