package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// envoyBin is the stand-in built once for the whole test run.
var envoyBin string

// prebuiltEnv names a stand-in binary already built, for a test re-run in
// a network namespace (handover_test.go).
const prebuiltEnv = "STANDIN_TEST_BIN"

func TestMain(m *testing.M) {
	if bin := os.Getenv(prebuiltEnv); bin != "" {
		envoyBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "envoy-standin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	envoyBin = filepath.Join(dir, "envoy")
	cmd := exec.Command("go", "build", "-o", envoyBin, ".")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the stand-in:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a child's output while tests read it.
type syncBuffer = testutil.SyncBuffer

type proc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

func startEnvoy(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(envoyBin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() || os.Getenv("ENVOY_STANDIN_TEST_LOGS") != "" {
			t.Logf("stand-in stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// runEnvoy runs the stand-in to completion.
func runEnvoy(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startEnvoy(t, env, args...)
	code = p.wait(t, 10*time.Second)
	return p.stdout.String(), p.stderr.String(), code
}

func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("stand-in still running after %s; stderr:\n%s", d, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testutil.Eventually

func adminDo(t *testing.T, sock, method, path string) (int, string) {
	t.Helper()
	code, body, err := adminTry(sock, method, path)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, body
}

func adminTry(sock, method, path string) (int, string, error) {
	req, _ := http.NewRequest(method, "http://localhost"+path, nil)
	resp, err := testutil.UnixHTTP(sock, 3*time.Second).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// statValue reads one stat from /stats text output; -1 if absent.
func statValue(t *testing.T, sock, name string) int64 {
	t.Helper()
	_, body, err := adminTry(sock, "GET", "/stats?filter=^"+regexp.QuoteMeta(name)+"$")
	if err != nil {
		return -1
	}
	var v int64 = -1
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+": ") {
			fmt.Sscanf(strings.TrimPrefix(line, name+": "), "%d", &v)
		}
	}
	return v
}

// pki is a throw-away CA with one server certificate.
type pki struct {
	caPEM      []byte
	serverCert tls.Certificate
}

func newPKI(t *testing.T, dnsNames []string, ips []net.IP) *pki {
	t.Helper()
	p := testutil.NewPKI(t, dnsNames, ips)
	return &pki{caPEM: p.CAPEM, serverCert: p.Cert}
}

type bootstrapParams struct {
	AdminSock string
	Workdir   string
	NodeID    string
	APIType   string
	Port      int
	SNI       string
	SAN       string
	CA        string
	Token     string
}

// shortTempDir keeps Unix socket paths under the 107-byte limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "es")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// writeBootstrap renders testdata/bootstrap.yaml.tmpl; zero fields get
// defaults so most tests only set what they test.
func writeBootstrap(t *testing.T, dir string, p bootstrapParams) string {
	t.Helper()
	if p.AdminSock == "" {
		p.AdminSock = filepath.Join(dir, "kuma-envoy-admin.sock")
	}
	if p.Workdir == "" {
		p.Workdir = dir
	}
	if p.NodeID == "" {
		p.NodeID = "payments.zp-egress-1"
	}
	if p.APIType == "" {
		p.APIType = "DELTA_GRPC"
	}
	if p.Port == 0 {
		p.Port = 1
	}
	if p.SNI == "" {
		p.SNI = "127.0.0.1"
	}
	if p.SAN == "" {
		p.SAN = "127.0.0.1"
	}
	if p.CA == "" {
		p.CA = base64.StdEncoding.EncodeToString(newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)}).caPEM)
	}
	tmpl := template.Must(template.ParseFiles("testdata/bootstrap.yaml.tmpl"))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort returns a TCP port that was free a moment ago.
var freePort = testutil.FreePort

// dialPort connects to 127.0.0.1:port; the connection is closed when the
// test ends.
func dialPort(t *testing.T, port int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialable reports whether a listener accepts on 127.0.0.1:port.
func dialable(port int) bool { return testutil.Accepts(fmt.Sprintf("127.0.0.1:%d", port)) }

// standardArgs is the command line kuma-dp uses (kuma-contract.md §4.2).
func standardArgs(bootstrap string, extra ...string) []string {
	return append([]string{"--config-path", bootstrap, "--drain-time-s", "1", "--drain-strategy", "immediate",
		"--disable-hot-restart", "--log-level", "info", "--cpuset-threads"}, extra...)
}
