package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// otherUser is a second user on every Linux host: the local attacker.
const otherUser = 65534

func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give directories to a second user")
	}
}

// Directories another user could change are refused before anything is
// read from or written into them (exit 78, naming the setting and why),
// and nothing outside them is touched.
func TestDirectoriesAnotherUserCouldChangeAreRefused(t *testing.T) {
	t.Parallel()
	asRoot(t)
	zone := harness.NewZone(t, bins, "payments")
	tests := []struct {
		name  string
		setup func(t *testing.T, p *harness.Proxy)
		want  string
	}{
		{"a state dir owned by another user, open to all", func(t *testing.T, p *harness.Proxy) {
			chownDir(t, p.StateDir, 0o777)
		}, "--state-dir " + "%s is owned by uid 65534"},
		{"a state dir inside a directory anyone may write", func(t *testing.T, p *harness.Proxy) {
			shared := filepath.Join(filepath.Dir(p.StateDir), "shared-"+filepath.Base(p.StateDir))
			mkdirMode(t, shared, 0o777)
			p.StateDir = filepath.Join(shared, "state")
		}, "which is writable by other users (mode 0777)"},
		{"a work dir inside a directory anyone may write", func(t *testing.T, p *harness.Proxy) {
			shared := filepath.Join(filepath.Dir(p.WorkDir), "shared-"+filepath.Base(p.WorkDir))
			mkdirMode(t, shared, 0o777)
			p.WorkDir = filepath.Join(shared, "wd")
		}, "--work-dir"},
		{"a work dir inside another user's directory", func(t *testing.T, p *harness.Proxy) {
			theirs := filepath.Join(filepath.Dir(p.WorkDir), "theirs-"+filepath.Base(p.WorkDir))
			chownDir(t, theirs, 0o755)
			p.WorkDir = filepath.Join(theirs, "wd")
		}, "which is owned by uid 65534: that user could replace it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := zone.NewProxy("payments", "egress")
			tt.setup(t, &p)
			code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
			want := strings.ReplaceAll(tt.want, "%s", p.StateDir)
			if code != 78 || !strings.Contains(out, want) {
				t.Fatalf("exit %d, want 78 saying %q\n%s", code, want, out)
			}
			if strings.Contains(out, "started Envoy") {
				t.Fatal("Envoy was started")
			}
		})
	}
}

// An xds link in the state dir is never followed: the directory it points
// to keeps its mode, and nothing is written into it.
func TestALinkInTheStateDirIsNeverFollowed(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	victim := filepath.Join(zone.Dir, "victim")
	mkdirMode(t, victim, 0o755)
	mkdirMode(t, p.StateDir, 0o700)
	if err := os.Symlink(victim, filepath.Join(p.StateDir, lkgcache.SubDir)); err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil)
	code := agent.Wait(promptly)
	if code != 78 || !strings.Contains(agent.Output(), "is not a directory (a link or a file)") {
		t.Fatalf("exit %d, want 78 for the link\n%s", code, agent.Output())
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the link's target: %v %v", fi, err)
	}
	if es, _ := os.ReadDir(victim); len(es) != 0 {
		t.Fatalf("written into the link's target: %v", es)
	}
}

// A cache file names the control plane it came from; the agent starting
// on it goes to the control plane of its configuration all the same, so a
// forged one cannot send the token elsewhere.
func TestACachedControlPlaneAddressIsNeverUsed(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	kill(t, agent)

	// Another server, with a certificate the agent's CA signed, waits for
	// the token.
	pki := testutil.NewPKI(t, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	thief, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki.Cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	var stolen atomic.Int32
	go func() {
		for {
			c, err := thief.Accept()
			if err != nil {
				return
			}
			stolen.Add(1)
			c.Close()
		}
	}()
	forgeUpstream(t, zone, p, cpdial.Target{Address: thief.Addr().String(), ServerName: "127.0.0.1", CAPEM: pki.CAPEM})

	zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
	again := zone.Start(p, nil)
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	zone.CP.SetFaults(controlplane.Faults{})
	harness.Eventually(t, promptly, "the live configuration", func() bool {
		code, body := readinessBody(t, p)
		return code == 200 && !strings.Contains(body, "cached")
	})
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the agent connected %d times to the address the cache named", n)
	}
}

// forgeUpstream rewrites p's cache to name up as its control plane.
func forgeUpstream(t *testing.T, zone *harness.Zone, p harness.Proxy, up cpdial.Target) {
	t.Helper()
	dp := onlyDataplane(t, zone)
	id := lkgcache.Identity{Mesh: p.Mesh, Name: dp.Name, Role: p.Role, ControlPlane: zone.CP.URL()}
	c, err := lkgcache.Open(lkgcache.Options{Dir: p.StateDir, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Usable()
	if err != nil {
		t.Fatal(err)
	}
	c.SetBootstrap(snap.Bootstrap, up)
	c.Store(snap.Types)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Two agents sharing a state dir would overwrite each other's cache: the
// second is refused (78), naming the first; neither start leaves a lock
// file behind.
func TestTwoAgentsCannotShareAStateDir(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	first := zone.NewProxy("payments", "egress")
	agent := zone.Start(first, nil, "--name", "zp-first")
	agent.AwaitReadiness(first.Readiness, 200, "READY", promptly)
	second := zone.NewProxy("payments", "egress")
	second.StateDir = first.StateDir
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(second, "--name", "zp-second")...)
	if code != 78 || !strings.Contains(out, "in use by another zoneproxy (pid ") || !strings.Contains(out, "give each zone proxy its own --state-dir") {
		t.Fatalf("exit %d, want 78 naming the state dir's holder\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(second.WorkDir, "zoneproxy.lock")); !os.IsNotExist(err) {
		t.Fatalf("the refused start left its work dir's lock: %v", err)
	}
	agent.Signal(syscall.SIGTERM)
	agent.Wait(2 * promptly)
	for _, dir := range []string{first.WorkDir, first.StateDir} {
		if _, err := os.Lstat(filepath.Join(dir, "zoneproxy.lock")); !os.IsNotExist(err) {
			t.Fatalf("a stopped agent left %s/zoneproxy.lock: %v", dir, err)
		}
	}
}

func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// chownDir makes dir, gives it to the second user, with mode.
func chownDir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	mkdirMode(t, dir, mode)
	if err := os.Chown(dir, otherUser, otherUser); err != nil {
		t.Fatal(err)
	}
}
