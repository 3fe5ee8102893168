package e2e

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

func TestControlPlaneDownAtStartThenUp(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitLog(`"attempt": 3`, promptly)
	out := agent.Output()
	if !strings.Contains(out, "bootstrap failed, retrying") || !strings.Contains(out, `"next"`) {
		t.Fatalf("retries are not logged with attempt and next delay:\n%s", out)
	}
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_CONTROL_PLANE", promptly)
	zone.CP.SetFaults(controlplane.Faults{})
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if agent.Exited() {
		t.Fatal("agent restarted instead of proceeding")
	}
}

func TestControlPlaneRestartWhileRunning(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil)
	envoyPID := agent.EnvoyPID(promptly)
	restarted := time.Now()
	if err := zone.CP.Restart(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, promptly, "Envoy to reconnect to the restarted control plane", func() bool {
		for _, px := range zone.CP.Proxies() {
			if px.Connected && px.ConnectedAt.After(restarted) && len(px.ACKed) > 0 {
				return true
			}
		}
		return false
	})
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if agent.Exited() || harness.ProcessGone(envoyPID) {
		t.Fatal("the agent or Envoy did not survive a control plane restart")
	}
	if !harness.Dial("127.0.0.1:" + strconv.Itoa(p.Egress)) {
		t.Fatal("Envoy stopped serving its listener")
	}
}

func TestEnvoyCrashStopsTheAgent(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	// Envoy crashes a while after it starts: long enough to turn ready first
	// (checked below, from the log, so a slow machine cannot race the check).
	agent := zone.Start(p, []string{"ENVOY_STANDIN_CRASH_AFTER=5s", "ENVOY_STANDIN_CRASH_SIGNAL=SEGV"})
	envoyPID := agent.EnvoyPID(promptly)
	if code := agent.Wait(promptly); code != 1 {
		t.Fatalf("exit %d, want 1 (a crash is for systemd to restart)", code)
	}
	if !harness.ProcessGone(envoyPID) {
		t.Error("Envoy still running after the agent exited")
	}
	out := agent.Output()
	ready, crashed := strings.Index(out, "\tEnvoy ready\t"), strings.Index(out, "Envoy exited unexpectedly")
	if ready < 0 || crashed < ready {
		t.Errorf("log does not show Envoy ready, then its exit:\n%s", out)
	}
	if !strings.Contains(out[max(crashed, 0):], "segmentation fault") {
		t.Errorf("log lacks Envoy's signal:\n%s", out)
	}
}

func TestEnvoyIgnoringSIGTERMIsKilled(t *testing.T) {
	t.Parallel()
	_, _, agent := readyEgress(t, []string{"ENVOY_STANDIN_IGNORE_SIGTERM=1"}, "--drain-time", "1s")
	envoyPID := agent.EnvoyPID(promptly)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if !harness.ProcessGone(envoyPID) {
		t.Fatal("Envoy still running")
	}
	if !strings.Contains(agent.Output(), "Envoy ignored SIGTERM; killed it") {
		t.Error("log does not say Envoy was killed")
	}
}

func TestAgentKilledTakesEnvoyWithItAndRestartsCleanly(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil)
	envoyPID := agent.EnvoyPID(promptly)
	agent.Signal(syscall.SIGKILL)
	agent.Wait(promptly)
	harness.Eventually(t, promptly, "Envoy to die with its agent", func() bool { return harness.ProcessGone(envoyPID) })

	// Neither process could clean up: Envoy's admin socket and the
	// bootstrap stay behind for the next start to remove.
	stale := []string{"kuma-envoy-admin.sock", "bootstrap.yaml"}
	if fi, err := os.Lstat(filepath.Join(p.WorkDir, stale[0])); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("the kill left no stale admin socket to clean up: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(p.WorkDir, stale[1])); err != nil {
		t.Fatalf("the kill left no stale bootstrap to clean up: %v", err)
	}

	// Hold the next start before it reaches Envoy: the stale files must be
	// gone already, not merely replaced by Envoy's own. (Without a cache:
	// with one, Envoy would start on it at once; see TestRestartWhileTheControlPlaneIsDownServesFromCache.)
	zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
	again := zone.Start(p, nil, "--state-dir", "")
	again.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_CONTROL_PLANE", promptly)
	for _, name := range stale {
		if _, err := os.Lstat(filepath.Join(p.WorkDir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stale %s still there after the next start (%v)", name, err)
		}
	}
	zone.CP.SetFaults(controlplane.Faults{})
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	again.Signal(syscall.SIGTERM)
	if code := again.Wait(promptly); code != 0 {
		t.Fatalf("second run exit %d", code)
	}
	if left, _ := os.ReadDir(p.WorkDir); len(left) != 0 {
		t.Errorf("work dir not cleaned after the second run: %v", names(left))
	}
}

func TestSecondAgentOnTheSameWorkDirRefuses(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins)
	p := zone.NewProxy("payments", "egress")
	first := zone.Start(p, nil)
	first.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
	q := p
	q.Readiness, q.Egress = harness.FreePort(t), harness.FreePort(t)
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(q)...)
	if code != 78 || !strings.Contains(out, "in use by another zoneproxy (pid "+strconv.Itoa(first.PID())+")") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if first.Exited() {
		t.Fatal("the first agent was disturbed")
	}
}

func TestPortsInUseAreFoundBeforeBootstrap(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"readiness-port", "egress-port"} {
		t.Run(flag, func(t *testing.T) {
			zone := harness.NewZone(t, bins, "payments")
			p := zone.NewProxy("payments", "egress")
			port := p.Readiness
			if flag == "egress-port" {
				port = p.Egress
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
			// Exit 1: the port's holder (here this test) may free it, and
			// systemd restarts the agent; the holder is named.
			holder := "it is held by pid " + strconv.Itoa(os.Getpid())
			if code != 1 || !strings.Contains(out, "--"+flag) || !strings.Contains(out, strconv.Itoa(port)) || !strings.Contains(out, holder) {
				t.Fatalf("exit %d, want 1 naming %q\n%s", code, holder, out)
			}
			if n := len(zone.CP.BootstrapRequests()); n != 0 {
				t.Fatalf("%d bootstrap requests sent", n)
			}
		})
	}
}

func fakeJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"1","typ":"JWT"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
}

// A token file that does not exist yet, or is empty (being written by a
// provisioner, or rewritten in place), exits 1: a restart may find it
// ready. Everything else wrong with it exits 78.
func TestBadTokensAreConfigErrors(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	dir := harness.ShortTempDir(t)
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name, file, want string
		code             int
		extra            []string
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist", 1, nil},
		{"empty", write("empty", "\n", 0o600), "is empty", 1, nil},
		{"empty, and a setting wrong", filepath.Join(dir, "empty"), "is empty", 78, []string{"--drain-time", "-1s"}},
		{"a directory", dir, "is a directory", 78, nil},
		{"not a JWT", write("garbage", "not-a-token", 0o600), "not a JWT", 78, nil},
		{"other mesh", write("billing", fakeJWT(`{"Mesh":"billing"}`), 0o600), `token is for mesh "billing", but --mesh is "payments"`, 78, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := zone.NewProxy("payments", "egress")
			p.TokenFile = tc.file
			code, out := harness.Run(t, bins.Zoneproxy, nil, append(zone.Args(p), tc.extra...)...)
			if code != tc.code || !strings.Contains(out, "--dataplane-token-file") || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d mentioning %q\n%s", code, tc.code, tc.want, out)
			}
		})
	}
}

// An expired token is a config error only on a synchronised clock; on one
// that may be wrong (a VM before NTP) the agent warns and lets the control
// plane decide. The kernel says which of the two this machine shows.
func TestExpiredToken(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	p.TokenFile = filepath.Join(harness.ShortTempDir(t), "expired")
	if err := os.WriteFile(p.TokenFile, []byte(fakeJWT(`{"Mesh":"payments","exp":1000000000}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	const expired = "token expired at 2001-09-09"
	if timesync.Check().Synced {
		code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
		if code != 78 || !strings.Contains(out, "--dataplane-token-file") || !strings.Contains(out, expired) {
			t.Fatalf("exit %d, want 78 mentioning %q\n%s", code, expired, out)
		}
		return
	}
	agent := zone.Start(p, nil)
	agent.AwaitLog(expired, promptly)
	if out := agent.Output(); !strings.Contains(out, "synchronised") || !strings.Contains(out, "keeps going") {
		t.Fatalf("the warning does not blame the clock:\n%s", out)
	}
	harness.Eventually(t, promptly, "the control plane to be asked", func() bool { return len(zone.CP.BootstrapRequests()) > 0 })
}

func TestTokenReadableByOthersWarns(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	if err := os.Chmod(p.TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil)
	agent.AwaitLog("has mode 0644", promptly)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
}

func TestInlineTokenWarnsAndWorks(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	tok, _ := os.ReadFile(p.TokenFile)
	p.TokenFile = ""
	args := zone.Args(p, "--dataplane-token", string(tok))
	args = removeFlag(args, "--dataplane-token-file")
	agent := harness.StartAgent(t, bins.Zoneproxy, nil, args...)
	agent.AwaitLog("an inline token leaks easily", promptly)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if strings.Contains(agent.Output(), strings.TrimSpace(string(tok))) {
		t.Fatal("token in the log")
	}
}

func removeFlag(args []string, flag string) []string {
	for i := range args {
		if args[i] == flag {
			return append(args[:i:i], args[i+2:]...)
		}
	}
	return args
}

func TestControlPlaneAPIPortIsAConfigError(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	apiAsHTTPS := strings.Replace(zone.CP.AdminURL(), "http://", "https://", 1)
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--cp-address", apiAsHTTPS)...)
	if code != 78 || !strings.Contains(out, "5678") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestWorkDirNotUsable(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	file := filepath.Join(harness.ShortTempDir(t), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := zone.NewProxy("payments", "egress")
	p.WorkDir = filepath.Join(file, "wd")
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
	if code != 78 || !strings.Contains(out, p.WorkDir) || !strings.Contains(out, "not a directory") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestSIGTERMWhileWaitingForTheMesh(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(agent.Output(), "started Envoy") {
		t.Error("Envoy was started although the mesh never existed")
	}
	if left, _ := os.ReadDir(p.WorkDir); len(left) != 0 {
		t.Errorf("work dir not cleaned: %v", names(left))
	}
}

func TestAdminSocketIsPrivate(t *testing.T) {
	t.Parallel()
	_, p, _ := readyEgress(t, nil)
	fi, err := os.Stat(filepath.Join(p.WorkDir, "kuma-envoy-admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("admin socket mode %v", fi.Mode().Perm())
	}
}

func TestDiskFullIsReportedWithPathAndCause(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tiny tmpfs as the work dir needs root")
	}
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	// A 4 KiB file system: the lock file fits, Envoy's bootstrap does not.
	if err := os.MkdirAll(p.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs", p.WorkDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", p.WorkDir).Run() })
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
	// A full disk is for the operator to free and systemd to retry: exit 1, not 78.
	if code != 1 || !strings.Contains(out, filepath.Join(p.WorkDir, "bootstrap.yaml")) || !strings.Contains(out, "no space left on device") {
		t.Fatalf("exit %d, want 1 naming the file and the cause\n%s", code, out)
	}
	entries, _ := os.ReadDir(p.WorkDir)
	if len(entries) != 0 {
		t.Errorf("left behind in the work dir: %v", names(entries))
	}
}

func TestSANMismatchIsAConfigErrorWithoutRetries(t *testing.T) {
	t.Parallel()
	// The control plane's certificate lists localhost, 127.0.0.1 and ::1;
	// reached as 127.0.0.2 it does not match.
	dir := harness.ShortTempDir(t)
	cp, err := controlplane.Start(controlplane.Options{Dir: dir, Addr: "127.0.0.2:0", Meshes: []string{"payments"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--cp-address", cp.URL(), "--ca-cert-file", cp.CACertFile())...)
	if code != 78 || !strings.Contains(out, "not valid for the host in --cp-address") || !strings.Contains(out, "127.0.0.1") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if n := len(cp.BootstrapRequests()); n != 0 || strings.Contains(out, "retrying") {
		t.Fatalf("retried a SAN mismatch (%d requests)\n%s", n, out)
	}
}

// Behind a wrapper that runs Envoy without exec, the parent-death signal
// reaches only the wrapper: an agent killed outright leaves Envoy running
// on the zone proxy's ports. The next agent on that work dir ends it,
// instead of refusing to start (78) on a port in use.
func TestAnEnvoyLeftBehindAWrapperIsEndedByTheNextAgent(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	dir := harness.ShortTempDir(t)
	wrapper := filepath.Join(dir, "envoy")
	// Envoy's output to a file of the wrapper's own, as such wrappers do:
	// nothing ties Envoy to the agent once the wrapper is gone.
	script := "#!/bin/sh\n[ \"$1\" = --version ] && exec " + bins.Envoy + " \"$@\"\n" +
		bins.Envoy + " \"$@\" >>" + filepath.Join(dir, "envoy.log") + " 2>&1\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil, "--envoy-binary", wrapper, "--state-dir", "")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	var envoyPID int
	harness.Eventually(t, promptly, "Envoy under its wrapper", func() bool {
		if kids := harness.Children(agent.EnvoyPID(promptly)); len(kids) > 0 {
			envoyPID = kids[0]
		}
		return envoyPID != 0
	})
	t.Cleanup(func() { _ = syscall.Kill(envoyPID, syscall.SIGKILL) })
	agent.Signal(syscall.SIGKILL)
	agent.Wait(promptly)
	if harness.ProcessGone(envoyPID) {
		t.Fatal("Envoy went with the agent: nothing left behind to test")
	}

	again := zone.Start(p, nil, "--envoy-binary", wrapper, "--state-dir", "")
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if !harness.ProcessGone(envoyPID) {
		t.Errorf("the Envoy left behind (%d) still runs", envoyPID)
	}
	if !strings.Contains(again.Output(), "ended the Envoy an earlier agent on this work dir left running") {
		t.Errorf("the next agent does not say it ended the leftover:\n%s", again.Output())
	}
	again.Signal(syscall.SIGTERM)
	if code := again.Wait(promptly); code != 0 {
		t.Fatalf("second run exit %d", code)
	}
}
