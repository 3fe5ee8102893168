package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filealv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// startWithCPArgs is startWithCP with extra command-line flags; it returns
// the work dir too.
func startWithCPArgs(t *testing.T, cp *testCP, extra ...string) (*proc, string, string) {
	t.Helper()
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{
		Port:  cp.port(),
		CA:    base64.StdEncoding.EncodeToString(cp.pki.caPEM),
		Token: testToken,
	})
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	p := startEnvoy(t, nil, standardArgs(path, extra...)...)
	waitFor(t, 10*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	return p, sock, dir
}

// fastFlush makes the access-log flush timer short, so tests need not
// wait Envoy's default 10 s.
var fastFlush = []string{"--file-flush-interval-msec", "50"}

// kumaFileLog is the logger kuma-cp puts on a zone listener for a Tcp
// backend with no format (kuma-observability.md §1.2).
func kumaFileLog(t *testing.T, path string) *accesslogv3.AccessLog {
	t.Helper()
	format, err := structpb.NewStruct(map[string]any{
		"address": "127.0.0.1:5000",
		"message": kumaTCPMessage,
	})
	if err != nil {
		t.Fatal(err)
	}
	return fileLog(t, path, &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: format}})
}

func fileLog(t *testing.T, path string, sfs *corev3.SubstitutionFormatString) *accesslogv3.AccessLog {
	t.Helper()
	a, err := anypb.New(&filealv3.FileAccessLog{Path: path, AccessLogFormat: &filealv3.FileAccessLog_LogFormat{LogFormat: sfs}})
	if err != nil {
		t.Fatal(err)
	}
	return &accesslogv3.AccessLog{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}
}

// loggedTCPListener is tcpProxyListener with access logs and
// flush_access_log_on_connected, as kuma-cp sends zone listeners.
func loggedTCPListener(t *testing.T, name string, port int, logs ...*accesslogv3.AccessLog) *listenerv3.Listener {
	t.Helper()
	l := tcpProxyListener(t, name, port, "backend")
	tp, err := anypb.New(&tcpproxyv3.TcpProxy{
		StatPrefix:       name,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "backend"},
		AccessLog:        logs,
		AccessLogOptions: &tcpproxyv3.TcpProxy_TcpAccessLogOptions{FlushAccessLogOnConnected: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: tp}
	return l
}

// sendAndClose opens a connection, writes payload and closes it.
func sendAndClose(t *testing.T, port int, payload string) {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

type logLine struct {
	Address string `json:"address"`
	Message string `json:"message"`
}

// readLogLines reads n newline-terminated JSON objects.
func readLogLines(t *testing.T, r *bufio.Reader, n int) []logLine {
	t.Helper()
	var out []logLine
	for len(out) < n {
		raw, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", len(out), err)
		}
		var l logLine
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q is not the expected JSON object: %v", raw, err)
		}
		out = append(out, l)
	}
	return out
}

func checkKumaMessage(t *testing.T, l logLine, received int) {
	t.Helper()
	if l.Address != "127.0.0.1:5000" {
		t.Errorf("address %q", l.Address)
	}
	want := fmt.Sprintf(" - payments 127.0.0.1(unknown)->-(unknown) took ")
	if !strings.HasPrefix(l.Message, "[20") || !strings.Contains(l.Message, want) ||
		!strings.HasSuffix(l.Message, fmt.Sprintf("ms, sent 0 bytes, received: %d bytes\n", received)) {
		t.Errorf("message %q", l.Message)
	}
}

func TestAccessLogFIFOWithoutReaderBlocksTheListener(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	fifo := filepath.Join(shortTempDir(t), "kuma-al-zp-egress-1-payments.sock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	lport := freePort(t)
	// The listener comes only once the stand-in is up: its blocked open
	// holds the admin API too, which start-up waits for.
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, nil)
	proc, _, _ := startWithCPArgs(t, cp, fastFlush...)
	waitFor(t, 10*time.Second, "CDS and LDS ACKs", func() bool {
		return cp.ackCount(resource.ClusterType) >= 1 && cp.ackCount(resource.ListenerType) >= 1
	})
	acked := cp.ackCount(resource.ListenerType)
	cp.setSnapshot(t, "v2", []types.Resource{staticCluster("backend")},
		[]types.Resource{loggedTCPListener(t, "zp", lport, kumaFileLog(t, fifo))})
	// Nothing can signal "still blocked", so watch for a while: the
	// listener must neither be ACKed nor bound while the open blocks.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if cp.ackCount(resource.ListenerType) > acked || dialable(lport) {
			t.Fatal("the listener was built although its access-log FIFO has no reader")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A reader unblocks the build. It is opened non-blocking (so a stand-in
	// that never opens the FIFO fails the test instead of hanging it) and
	// read through Go's poller with a deadline.
	rf, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	rf.SetReadDeadline(time.Now().Add(20 * time.Second))
	// The stand-in binds before it ACKs.
	waitFor(t, 10*time.Second, "LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) > acked })

	// One line on connect (flush_access_log_on_connected), one on close.
	sendAndClose(t, lport, "hello")
	got := readLogLines(t, bufio.NewReader(rf), 2)
	checkKumaMessage(t, got[0], 0)
	checkKumaMessage(t, got[1], 5)
	if proc.exited() {
		t.Fatal("stand-in exited")
	}
}

func TestAccessLogPathIsCreatedAndReopened(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	path := filepath.Join(shortTempDir(t), "access.log")
	lport := freePort(t)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")},
		[]types.Resource{loggedTCPListener(t, "zp", lport, kumaFileLog(t, path), kumaFileLog(t, path))})
	_, sock, _ := startWithCPArgs(t, cp, fastFlush...)
	waitFor(t, 10*time.Second, "LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) >= 1 })

	// A missing path becomes a regular file, created before any traffic.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("%s is %v, want a regular file", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o022 != 0 || fi.Mode().Perm()&0o600 != 0o600 {
		t.Errorf("mode %v, want 0644 less the umask", fi.Mode().Perm())
	}

	// Two loggers share the file: four lines per connection, in one file.
	sendAndClose(t, lport, "abc")
	waitFor(t, 5*time.Second, "4 lines", func() bool { return countLines(path) == 4 })

	// /reopen_logs reopens it: after a rename, lines go to a new file.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if code, body := adminDo(t, sock, "POST", "/reopen_logs"); code != 200 || body != "OK\n" {
		t.Fatalf("/reopen_logs: %d %q", code, body)
	}
	waitFor(t, 5*time.Second, "reopened file", func() bool { _, err := os.Stat(path); return err == nil })
	sendAndClose(t, lport, "defg")
	waitFor(t, 5*time.Second, "4 lines in the new file", func() bool { return countLines(path) == 4 })
	if n := countLines(path + ".1"); n != 4 {
		t.Errorf("old file has %d lines, want 4", n)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "received: 4 bytes") {
		t.Errorf("new file:\n%s", b)
	}
	if code, _ := adminDo(t, sock, "GET", "/reopen_logs"); code != 405 {
		t.Errorf("GET /reopen_logs = %d, want 405", code)
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return strings.Count(string(b), "\n")
}

func TestAccessLogConfigErrorsAreNACKed(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	dir := shortTempDir(t)
	text := func(f string) *corev3.SubstitutionFormatString {
		return &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
			TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: f}},
		}}
	}
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{
		loggedTCPListener(t, "bad-format", freePort(t), fileLog(t, filepath.Join(dir, "a.log"), text("%NOPE%\n"))),
		loggedTCPListener(t, "bad-path", freePort(t), fileLog(t, filepath.Join(dir, "missing", "a.log"), text("x\n"))),
	})
	startWithCPArgs(t, cp, fastFlush...)
	for _, want := range []string{
		"bad-format: Not supported field in StreamInfo: NOPE",
		"bad-path: unable to open file '" + filepath.Join(dir, "missing", "a.log") + "': No such file or directory",
	} {
		waitFor(t, 10*time.Second, "NACK "+want, func() bool { return cp.nackSeen(want) })
	}
}
