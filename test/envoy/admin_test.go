package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startNoADS runs the stand-in against an ADS address nothing listens on.
func startNoADS(t *testing.T, env []string, extra ...string) (p *proc, sock, dir string) {
	t.Helper()
	dir = shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: freePort(t), Token: "secret-token-value"})
	sock = filepath.Join(dir, "kuma-envoy-admin.sock")
	p = startEnvoy(t, env, standardArgs(path, extra...)...)
	waitFor(t, 5*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	return p, sock, dir
}

func TestAdminOverUDS(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	// A stale file at the path is unlinked before bind, as Envoy does.
	if err := os.WriteFile(sock, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := writeBootstrap(t, dir, bootstrapParams{Port: freePort(t), Token: "secret-token-value"})
	p := startEnvoy(t, nil, standardArgs(path)...)
	waitFor(t, 5*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket mode %v, want socket 0600", fi.Mode())
	}

	code, body := adminDo(t, sock, "GET", "/ready")
	if code != 503 || body != "PRE_INITIALIZING\n" {
		t.Fatalf("/ready = %d %q", code, body)
	}
	code, body = adminDo(t, sock, "GET", "/healthcheck/fail")
	if code != 405 || body != "Method GET not allowed, POST required." {
		t.Fatalf("GET /healthcheck/fail = %d %q", code, body)
	}
	for _, path := range []string{"/quitquitquit", "/drain_listeners?graceful", "/logging?level=debug", "/healthcheck/ok"} {
		if code, _ := adminDo(t, sock, "GET", path); code != 405 {
			t.Errorf("GET %s = %d, want 405", path, code)
		}
	}
	code, body = adminDo(t, sock, "GET", "/nope")
	if code != 404 || !strings.HasPrefix(body, "invalid path. admin commands are:\n") || !strings.Contains(body, "  /ready: ") {
		t.Fatalf("/nope = %d %q", code, body)
	}
	if code, body = adminDo(t, sock, "POST", "/healthcheck/fail"); code != 200 || body != "OK\n" {
		t.Fatalf("POST /healthcheck/fail = %d %q", code, body)
	}
	// Not initialized yet, so still PRE_INITIALIZING (Envoy's serverState).
	if _, body = adminDo(t, sock, "GET", "/ready"); body != "PRE_INITIALIZING\n" {
		t.Fatalf("/ready after fail = %q", body)
	}
	if v := statValue(t, sock, "server.live"); v != 0 {
		t.Fatalf("server.live = %d", v)
	}
	if v := statValue(t, sock, "server.state"); v != 2 {
		t.Fatalf("server.state = %d", v)
	}
	if v := statValue(t, sock, "control_plane.connected_state"); v != 0 {
		t.Fatalf("connected_state = %d", v)
	}
	if v := statValue(t, sock, "listener.admin.downstream_cx_total"); v < 1 {
		t.Fatalf("listener.admin.downstream_cx_total = %d", v)
	}

	_, body = adminDo(t, sock, "GET", "/server_info")
	var info struct {
		Version     string `json:"version"`
		State       string `json:"state"`
		Uptime      string `json:"uptime_current_epoch"`
		CommandLine struct {
			DrainTime     string `json:"drain_time"`
			LogLevel      string `json:"log_level"`
			Concurrency   int    `json:"concurrency"`
			DrainStrategy string `json:"drain_strategy"`
		} `json:"command_line_options"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if info.State != "PRE_INITIALIZING" || info.CommandLine.DrainTime != "1s" || info.CommandLine.LogLevel != "info" ||
		info.CommandLine.Concurrency < 1 || info.CommandLine.DrainStrategy != "Immediate" || info.Node.ID != "payments.zp-egress-1" ||
		!strings.Contains(info.Version, "/1.39.0/") || info.Uptime == "" {
		t.Fatalf("server_info: %+v", info)
	}

	_, body = adminDo(t, sock, "GET", "/stats?format=json&filter=server%5C.state")
	var js struct {
		Stats []struct {
			Name  string `json:"name"`
			Value int64  `json:"value"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(body), &js); err != nil || len(js.Stats) != 1 || js.Stats[0].Name != "server.state" {
		t.Fatalf("json stats %q (%v)", body, err)
	}
	_, body = adminDo(t, sock, "GET", "/stats/prometheus")
	if !strings.Contains(body, "# TYPE envoy_server_live gauge\nenvoy_server_live 0\n") ||
		!strings.Contains(body, "envoy_control_plane_connected_state 0") {
		t.Fatalf("prometheus: %s", body)
	}

	// The token rides in the bootstrap; it must not reach the logs.
	_, body = adminDo(t, sock, "POST", "/logging?level=debug")
	if !strings.Contains(body, "  upstream: debug\n") {
		t.Fatalf("/logging: %q", body)
	}
	if strings.Contains(p.stderr.String(), "secret-token-value") {
		t.Fatal("initial_metadata value leaked into the log")
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	if !strings.Contains(p.stderr.String(), "[warning][main]") || !strings.Contains(p.stderr.String(), "caught ENVOY_SIGTERM") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}
}

func TestQuitQuitQuit(t *testing.T) {
	p, sock, _ := startNoADS(t, nil)
	if code, body := adminDo(t, sock, "POST", "/quitquitquit"); code != 200 || body != "OK\n" {
		t.Fatalf("%d %q", code, body)
	}
	if code := p.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestIgnoreSigtermNeedsSigkill(t *testing.T) {
	p, sock, _ := startNoADS(t, []string{"ENVOY_STANDIN_IGNORE_SIGTERM=1"})
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Process.Signal(syscall.SIGINT)
	// Still answering after both signals were delivered and handled.
	for i := 0; i < 5; i++ {
		if code, _ := adminDo(t, sock, "GET", "/ready"); code != 503 {
			t.Fatalf("/ready = %d", code)
		}
	}
	if p.exited() {
		t.Fatal("exited on SIGTERM despite ENVOY_STANDIN_IGNORE_SIGTERM")
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 5*time.Second)
	if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("wait status %v", ws)
	}
}

func TestCrashHooks(t *testing.T) {
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: freePort(t)})
	p := startEnvoy(t, []string{"ENVOY_STANDIN_CRASH_AFTER=300ms", "ENVOY_STANDIN_CRASH_CODE=7"}, standardArgs(path)...)
	if code := p.wait(t, 5*time.Second); code != 7 {
		t.Fatalf("exit %d, want 7", code)
	}
	p = startEnvoy(t, []string{"ENVOY_STANDIN_CRASH_AFTER=300ms", "ENVOY_STANDIN_CRASH_SIGNAL=SEGV"}, standardArgs(path)...)
	p.wait(t, 5*time.Second)
	if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Fatalf("wait status %v, want killed by SIGSEGV", ws)
	}
}

func TestWedgeAdminAndStartDelay(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	path := writeBootstrap(t, dir, bootstrapParams{Port: freePort(t)})
	argsFile := filepath.Join(dir, "args.jsonl")
	start := time.Now()
	startEnvoy(t, []string{"ENVOY_STANDIN_START_DELAY=400ms", "ENVOY_STANDIN_WEDGE_ADMIN_AFTER=1500ms", "ENVOY_STANDIN_ARGS_FILE=" + argsFile}, standardArgs(path)...)
	waitFor(t, 5*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	if time.Since(start) < 400*time.Millisecond {
		t.Fatal("admin came up before ENVOY_STANDIN_START_DELAY")
	}
	waitFor(t, 5*time.Second, "admin to wedge", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err != nil
	})
	b, err := os.ReadFile(argsFile)
	if err != nil || !strings.HasPrefix(string(b), `["--config-path","`+path+`","--drain-time-s","1"`) {
		t.Fatalf("args file %q %v", b, err)
	}
}

func TestAdminBindFailures(t *testing.T) {
	dir := shortTempDir(t)
	long := filepath.Join(dir, strings.Repeat("x", 110)+".sock")
	path := writeBootstrap(t, dir, bootstrapParams{AdminSock: long, Port: freePort(t)})
	_, errOut, code := runEnvoy(t, nil, standardArgs(path)...)
	if code != 1 || !strings.Contains(errOut, "exceeds maximum UNIX domain socket path size of 108.") {
		t.Fatalf("long path: code %d %q", code, errOut)
	}
	path = writeBootstrap(t, dir, bootstrapParams{AdminSock: filepath.Join(dir, "no", "such", "admin.sock"), Port: freePort(t)})
	_, errOut, code = runEnvoy(t, nil, standardArgs(path)...)
	if code != 1 || !strings.Contains(errOut, "[critical]") || !strings.Contains(errOut, "cannot bind '"+filepath.Join(dir, "no", "such", "admin.sock")+"': No such file or directory") {
		t.Fatalf("missing dir: code %d %q", code, errOut)
	}
}
