package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// `systemctl kill`, or a terminal's process group, signals the agent and
// Envoy at once: whichever stops first, it is a clean stop.
func TestAgentAndEnvoySignalledTogetherStopCleanly(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		_, p, agent := readyEgress(t, nil)
		envoyPID := agent.EnvoyPID(20 * time.Second)
		_ = syscall.Kill(envoyPID, syscall.SIGTERM)
		agent.Signal(syscall.SIGTERM)
		if code := agent.Wait(30 * time.Second); code != 0 {
			t.Fatalf("round %d: exit %d, want 0\n%s", round, code, agent.Output())
		}
		if strings.Contains(agent.Output(), "exited unexpectedly") {
			t.Fatalf("round %d: a stop was reported as a crash\n%s", round, agent.Output())
		}
		assertNothingLeft(t, agent, envoyPID, p.WorkDir)
	}
}

func TestSIGHUPDrainsAndStops(t *testing.T) {
	t.Parallel()
	skipIfHangUpIgnored(t)
	_, p, agent := readyEgress(t, nil)
	envoyPID := agent.EnvoyPID(20 * time.Second)
	agent.Signal(syscall.SIGHUP)
	if code := agent.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	out := agent.Output()
	if !strings.Contains(out, `"signal": "hangup"`) || !strings.Contains(out, "draining Envoy") {
		t.Fatalf("SIGHUP did not drain\n%s", out)
	}
	assertNothingLeft(t, agent, envoyPID, p.WorkDir)
}

// Ctrl-C reaches the agent's process group; with no --work-dir the agent
// used a temp dir, which must go too.
func TestCtrlCFromATerminalLeavesNothing(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	tmp := harness.ShortTempDir(t)
	var args []string
	full := zone.Args(p)
	for i := 0; i < len(full); i++ {
		if full[i] == "--work-dir" {
			i++
			continue
		}
		args = append(args, full[i])
	}
	var out harness.SyncBuffer
	cmd := exec.Command(bins.Zoneproxy, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // like a shell's job
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("zoneproxy output:\n%s", out.String())
		}
	})
	harness.Eventually(t, 20*time.Second, "READY", func() bool {
		code, word := harness.Readiness(p.Readiness)
		return code == 200 && word == "READY"
	})
	var envoyPID int
	for _, c := range harness.Children(cmd.Process.Pid) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(c) + "/cmdline"); err == nil && bytes.Contains(b, []byte("--config-path")) {
			envoyPID = c
		}
	}
	if envoyPID == 0 {
		t.Fatal("no Envoy child")
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // what the terminal does on ^C
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop on Ctrl-C")
	}
	harness.Eventually(t, 10*time.Second, "Envoy to be gone", func() bool { return harness.ProcessGone(envoyPID) })
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 0 {
		t.Fatalf("left in TMPDIR: %v", names(entries))
	}
}

// A stop signal while `envoy --version` runs is a stop, not a broken
// --envoy-binary.
func TestStopDuringEnvoyVersionIsACleanStop(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	dir := harness.ShortTempDir(t)
	marker := filepath.Join(dir, "asked")
	slow := envoyWrapper(t, dir, ": >"+marker+"; exec sleep 60")
	agent := zone.Start(p, nil, "--envoy-binary", slow)
	harness.Eventually(t, 20*time.Second, "envoy --version to run", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(20 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, agent.Output())
	}
	if strings.Contains(agent.Output(), "--envoy-binary") {
		t.Fatalf("a stop was blamed on --envoy-binary\n%s", agent.Output())
	}
}

func TestWorkDirWritableByOthersIsRefusedAndLeftAlone(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	if err := os.Mkdir(p.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.WorkDir, os.ModeSticky|0o777); err != nil { // like /tmp
		t.Fatal(err)
	}
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
	if code != 78 || !strings.Contains(out, "writable by other users") {
		t.Fatalf("exit %d, want 78\n%s", code, out)
	}
	fi, err := os.Stat(p.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the agent changed the directory's mode to %v", fi.Mode())
	}
	if n := len(zone.CP.BootstrapRequests()); n != 0 {
		t.Fatalf("%d bootstrap requests before refusing", n)
	}
}

// The drain waits --drain-min before it may end, so a load balancer sees
// the failing health check, even with no connection open.
func TestDrainWaitsDrainMinWithNoConnection(t *testing.T) {
	t.Parallel()
	_, _, agent := readyEgress(t, nil, "--drain-time", "60s", "--drain-min", "3s")
	sent := time.Now()
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if took := time.Since(sent); took < 3*time.Second {
		t.Fatalf("stopped after %s, before --drain-min", took)
	}
	if !strings.Contains(agent.Output(), "no downstream connections left; ending the drain early") {
		t.Fatalf("the drain did not end early once idle\n%s", agent.Output())
	}
}

func assertNothingLeft(t *testing.T, agent *harness.Agent, envoyPID int, workDir string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "Envoy to be gone", func() bool { return harness.ProcessGone(envoyPID) })
	if entries, _ := os.ReadDir(workDir); len(entries) != 0 {
		t.Fatalf("left in the work dir: %v\n%s", names(entries), agent.Output())
	}
}

// skipIfHangUpIgnored: under nohup the agent inherits SIGHUP ignored and
// rightly takes it for neither a stop nor a reload.
func skipIfHangUpIgnored(t *testing.T) {
	t.Helper()
	if signal.Ignored(syscall.SIGHUP) {
		t.Skip("SIGHUP is ignored in this test run (nohup?): the agent started from it cannot be told of a hang-up")
	}
}
