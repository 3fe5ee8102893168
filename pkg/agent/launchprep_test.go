package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// preparedAgent is a relaying agent with a fresh work dir whose launch
// preparation has started.
func preparedAgent(t *testing.T) (*Agent, *workDir, *launchPrep) {
	t.Helper()
	wd, err := openWorkDir(filepath.Join(t.TempDir(), "work"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wd.cleanup)
	a := New(Options{Config: &config.Config{XDSRelay: true, Mesh: "payments", Name: "zp-1", Role: config.RoleEgress}})
	return a, wd, a.prepareLaunch(wd)
}

// The relay's socket, the FIFO and the MeshMetric socket are made while the
// bootstrap is fetched; a launch that fails after that fails as it always
// did and leaves none of them behind.
func TestLaunchFailureAfterTheEarlySocketsLeavesNothing(t *testing.T) {
	a, wd, prep := preparedAgent(t)
	dir := wd.path
	<-prep.done
	if got := entries(t, dir); len(got) != 5 { // lock, relay socket, FIFO, MeshMetric socket, empty bootstrap
		t.Fatalf("prepared: %v", got)
	}
	err := a.runEnvoy(context.Background(), wd, "/nonexistent/envoy", []byte("not: [a bootstrap"), nil, nil, prep)
	if err == nil || !strings.Contains(err.Error(), "the control plane's bootstrap is unusable") || !exitcode.IsConfig(err) {
		t.Fatalf("err = %v, want the unusable-bootstrap config error", err)
	}
	// Envoy would have talked to the control plane directly: no relay socket.
	if _, err := os.Lstat(filepath.Join(dir, relaySocket)); err == nil {
		t.Errorf("the relay's socket is left while the relay is not used")
	}
	prep.release()
	if got := entries(t, dir); len(got) != 1 || got[0] != lockFile {
		t.Errorf("left in the work dir: %v", got)
	}
}

// Stopped while waiting for the control plane: nothing was launched.
func TestUnusedLaunchPrepIsRemoved(t *testing.T) {
	_, wd, prep := preparedAgent(t)
	dir := wd.path
	if _, err := prep.stats(context.Background(), ""); err == nil {
		t.Error("stats answered before Envoy runs")
	}
	prep.release()
	if got := entries(t, dir); len(got) != 1 || got[0] != lockFile {
		t.Errorf("left in the work dir: %v", got)
	}
}

// The bootstrap goes into the file made ahead, whole and private; without
// one it is written the usual way.
func TestBootstrapIsWrittenIntoThePreparedFile(t *testing.T) {
	for _, prepared := range []bool{true, false} {
		_, wd, prep := preparedAgent(t)
		<-prep.done
		if !prepared {
			prep.bootstrap.Close()
			_ = os.Remove(prep.bootstrap.Name())
			prep.bootstrap = nil
		}
		doc := []byte(`{"admin":{}}` + "\n")
		path, err := prep.writeBootstrap(wd, doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(doc) {
			t.Fatalf("prepared=%v: %s holds %q, %v", prepared, path, got, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("prepared=%v: mode %v, want 0600", prepared, fi.Mode().Perm())
		}
		prep.release()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("prepared=%v: release removed the bootstrap Envoy was given", prepared)
		}
	}
}

// A write that fails leaves no partial bootstrap and says which file.
func TestFailedBootstrapWriteLeavesNoFile(t *testing.T) {
	_, wd, prep := preparedAgent(t)
	<-prep.done
	prep.bootstrap.Close() // the write will fail
	_, err := prep.writeBootstrap(wd, []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "cannot write "+filepath.Join(wd.path, bootstrapFile)) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(wd.path, bootstrapFile)); err == nil {
		t.Error("a bootstrap file is left after the failed write")
	}
}
