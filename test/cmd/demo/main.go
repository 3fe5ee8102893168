// Command demo shows zoneproxy's main flow on loopback: the agent starts
// before its mesh exists and waits, the mesh is created, the agent
// bootstraps and runs Envoy (the stand-in) until READY, and a stop signal
// drains and stops everything. DEMO_SECONDS=N stops it after N seconds.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

const (
	mesh     = "payments"
	workload = "zone-proxy-payments-egress"
)

func main() {
	if err := run(); err != nil {
		say("demo failed: %v", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "\033[1m==> "+format+"\033[0m\n", args...)
}

func run() error {
	dir, err := os.MkdirTemp("", "zp-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	say("building zoneproxy and the Envoy stand-in")
	bins, err := harness.Build(filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "cp")})
	if err != nil {
		return err
	}
	defer cp.Close()
	say("test control plane: %s (admin API %s); mesh %q does not exist yet", cp.URL(), cp.AdminURL(), mesh)

	tok, err := cp.IssueToken(controlplane.TokenRequest{Mesh: mesh, Workload: workload, ValidFor: time.Hour})
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return err
	}
	readiness, egress := freePort(), freePort()
	workDir := filepath.Join(dir, "work")
	args := []string{"run", "--mesh", mesh, "--role", "egress", "--address", "127.0.0.1",
		"--cp-address", cp.URL(), "--ca-cert-file", cp.CACertFile(), "--dataplane-token-file", tokenFile,
		"--envoy-binary", bins.Envoy, "--work-dir", workDir,
		"--readiness-port", strconv.Itoa(readiness), "--egress-port", strconv.Itoa(egress),
		"--drain-time", "20s", "--drain-min", "1s", "--retry-initial", "500ms", "--retry-max", "2s"}
	say("zoneproxy %s", strings.Join(args, " "))
	agent := exec.Command(bins.Zoneproxy, args...)
	agent.Stdout, agent.Stderr = os.Stdout, os.Stderr
	// Its own process group: a terminal ^C reaches the demo, which then
	// sends the agent exactly one SIGTERM (a second one would skip the drain).
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := agent.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	var deadline <-chan time.Time
	if s, err := strconv.Atoi(os.Getenv("DEMO_SECONDS")); err == nil && s > 0 {
		deadline = time.After(time.Duration(s) * time.Second)
	}
	createMesh := time.After(4 * time.Second)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	last := ""
	for {
		select {
		case <-createMesh:
			say("creating mesh %q on the control plane", mesh)
			cp.CreateMesh(mesh)
		case <-poll.C:
			code, body := harness.Readiness(readiness)
			if now := fmt.Sprintf("%d %s", code, body); now != last && code != 0 {
				say("GET http://127.0.0.1:%d/ready -> %s", readiness, now)
				last = now
				if code == 200 {
					say("zone egress is ready; press Ctrl-C to drain and stop")
				}
			}
		case err := <-exited:
			return fmt.Errorf("zoneproxy exited by itself: %v", err)
		case <-stop:
			return shutdown(agent, exited, egress, workDir)
		case <-deadline:
			return shutdown(agent, exited, egress, workDir)
		}
	}
}

func shutdown(agent *exec.Cmd, exited <-chan error, egress int, workDir string) error {
	children := harness.Children(agent.Process.Pid)
	// A client still connected through the egress: the drain waits for it.
	// It sends a TLS ClientHello, as real clients do: Envoy's tls_inspector
	// does not count a socket as a connection before one arrives.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(egress))
	if conn, err := harness.DialTLSHello(addr, controlplane.DestinationSNI(mesh, "egress")); err != nil {
		say("no client connection through the egress: %v", err)
	} else if !envoyCounts(workDir) {
		say("Envoy does not count the client connection; the drain will not wait for it")
		conn.Close()
	} else {
		say("a client holds a TLS connection through the egress; it leaves 3s after the stop signal")
		time.AfterFunc(3*time.Second, func() {
			say("the client closes its connection")
			conn.Close()
		})
	}
	say("sending SIGTERM to zoneproxy (pid %d): the egress first leaves kuma-cp's egress set (about 14s: the control plane's 10s deregistration delay, then the sidecars' refresh), then drains", agent.Process.Pid)
	_ = agent.Process.Signal(syscall.SIGTERM)
	err := <-exited
	for _, pid := range children {
		if !harness.ProcessGone(pid) {
			return fmt.Errorf("process %d outlived zoneproxy", pid)
		}
	}
	if err != nil {
		return fmt.Errorf("zoneproxy: %v", err)
	}
	say("zoneproxy exited 0; Envoy is gone; nothing left running")
	return nil
}

// envoyCounts waits a little for Envoy to count a zone connection.
func envoyCounts(workDir string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, err := harness.ZoneConnections(workDir); err == nil && n > 0 {
			return true
		}
	}
	return false
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
