package e2e

import (
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// A restarted journald closes the agent's stderr: the zone proxy must keep
// running instead of dying of SIGPIPE at its next log line.
func TestClosedLogPipeDoesNotKillTheAgent(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	cmd := exec.Command(bins.Zoneproxy, zone.Args(p)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	harness.Eventually(t, promptly, "READY", func() bool {
		code, _ := harness.Readiness(p.Readiness)
		return code == 200
	})
	stderr.Close() // the reader goes away; the agent's next write gets EPIPE
	// Make the agent log: readiness probes and a log-level change do.
	resp, err := http.Post("http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/logging?level=debug", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /logging: %v %v", resp, err)
	}
	resp.Body.Close()
	for i := 0; i < 20; i++ {
		if code, _ := harness.Readiness(p.Readiness); code != 200 {
			t.Fatalf("agent stopped answering after its log pipe closed (%d)", code)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exit: %v", err)
		}
	case <-time.After(promptly):
		t.Fatal("agent did not stop")
	}
}
