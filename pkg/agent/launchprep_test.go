package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
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
	if got := entries(t, dir); len(got) != 4 { // lock, relay socket, FIFO, MeshMetric socket
		t.Fatalf("prepared: %v", got)
	}
	err := a.runEnvoy(context.Background(), wd, "/nonexistent/envoy", envoy.Version{}, []byte("not: [a bootstrap"), nil, nil, prep)
	if err == nil || !strings.Contains(err.Error(), "the control plane's bootstrap is unusable") || !exitcode.IsConfig(err) {
		t.Fatalf("err = %v, want the unusable-bootstrap config error", err)
	}
	// Envoy would have talked to the control plane directly: no relay socket.
	if _, err := os.Lstat(filepath.Join(dir, xds.SocketName)); err == nil {
		t.Errorf("the relay's socket is left while the relay is not used")
	}
	prep.release()
	if got := entries(t, dir); len(got) != 1 || got[0] != securedir.LockFile {
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
	if got := entries(t, dir); len(got) != 1 || got[0] != securedir.LockFile {
		t.Errorf("left in the work dir: %v", got)
	}
}
