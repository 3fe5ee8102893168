package localserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
	"github.com/zoneproxy/zoneproxy/pkg/state"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// serveBoth runs a server with /metrics, /drain and /logging on a
// loopback listener and a metrics listener; it returns both addresses and
// the drains done.
func serveBoth(t *testing.T) (loopback, metrics string, drains *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, state.NewTracker())
	s.ServeMetricsOn(mln)
	s.HandleMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zoneproxy_ready 0\n") }))
	drains = &atomic.Int32{}
	s.HandleMaintenance(Maintenance{Drain: func() error { drains.Add(1); return nil }, Undrain: func() {}})
	s.Handle("/logging", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zoneproxy: info\n") }))
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return ln.Addr().String(), mln.Addr().String(), drains
}

// A page on a name its author controls, pointed at 127.0.0.1 or at this
// host once loaded (DNS rebinding), sends that name as Host: it is
// refused, so the page cannot read /ready, /status or /metrics. curl and
// zoneproxy's commands ask by IP or localhost.
func TestOnlyLocalhostAndIPHostsAreAnswered(t *testing.T) {
	lo, metrics, _ := serveBoth(t)
	_, loPort, _ := net.SplitHostPort(lo)
	cases := []struct {
		name, addr, path, host string
		want                   int
	}{
		{"loopback by 127.0.0.1 and port (curl, zoneproxy drain)", lo, "/ready", lo, 503},
		{"loopback by localhost and port", lo, "/ready", "localhost:" + loPort, 503},
		{"loopback by LOCALHOST", lo, "/ready", "LOCALHOST", 503},
		{"loopback by another 127/8 address", lo, "/ready", "127.1.2.3:" + loPort, 503},
		{"loopback by [::1]", lo, "/ready", "[::1]:" + loPort, 503},
		{"loopback by a v4-mapped loopback", lo, "/ready", "[::ffff:127.0.0.1]:" + loPort, 503},
		{"loopback without Host (HTTP/1.0)", lo, "/ready", "", 503},
		{"loopback by a rebinding name", lo, "/ready", "evil.example:" + loPort, http.StatusMisdirectedRequest},
		{"loopback's /metrics by a rebinding name", lo, "/metrics", "evil.example", http.StatusMisdirectedRequest},
		{"loopback by a name under localhost", lo, "/ready", "localhost.evil.example:" + loPort, http.StatusMisdirectedRequest},
		{"loopback by this host's IP: not a loopback address", lo, "/ready", "10.0.0.5:" + loPort, http.StatusMisdirectedRequest},
		{"metrics by its own address", metrics, "/metrics", metrics, 200},
		{"metrics by any IP of the host (a wildcard listener)", metrics, "/metrics", "10.0.0.5:9903", 200},
		{"metrics by an IPv6 address", metrics, "/metrics", "[2001:db8::5]:9903", 200},
		{"metrics by localhost", metrics, "/metrics", "localhost", 200},
		{"metrics by a rebinding name", metrics, "/metrics", "evil.example:9903", http.StatusMisdirectedRequest},
		{"metrics by a host name (scrape by IP instead)", metrics, "/metrics", "zp-1.zone.internal:9903", http.StatusMisdirectedRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := testutil.AskWithHost(t, nil, tc.addr, http.MethodGet, tc.path, tc.host)
			if code != tc.want {
				t.Fatalf("Host %q: %d %q, want %d", tc.host, code, body, tc.want)
			}
			if code == http.StatusMisdirectedRequest && (!strings.Contains(body, "DNS rebinding") || !strings.Contains(body, tc.host)) {
				t.Errorf("the refusal does not say why: %q", body)
			}
		})
	}
}

// Only root and the agent's own user may drain, undrain or change log
// levels; anyone on the host may read /ready and /metrics.
func TestChangesOnlyFromRootOrTheAgentsUser(t *testing.T) {
	const serviceUser, otherUser = 64000, 64001
	cases := []struct {
		name          string
		agent, client int
		method, path  string
		want          int
	}{
		{"root drains a root agent", 0, 0, "POST", "/drain", http.StatusAccepted},
		{"another user may not drain a root agent", 0, otherUser, "POST", "/drain", http.StatusForbidden},
		{"the service user drains its agent", serviceUser, serviceUser, "POST", "/drain", http.StatusAccepted},
		{"root drains the service user's agent", serviceUser, 0, "POST", "/drain", http.StatusAccepted},
		{"another user may not drain the service user's agent", serviceUser, otherUser, "POST", "/drain", http.StatusForbidden},
		{"another user may not undrain", serviceUser, otherUser, "POST", "/undrain", http.StatusForbidden},
		{"another user may not change log levels", serviceUser, otherUser, "POST", "/logging?level=debug", http.StatusForbidden},
		{"another user may read the log levels", serviceUser, otherUser, "GET", "/logging", http.StatusOK},
		{"another user may read /ready", serviceUser, otherUser, "GET", "/ready", http.StatusServiceUnavailable},
		{"another user may read /metrics", serviceUser, otherUser, "GET", "/metrics", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			agentUID = func() uint32 { return uint32(tc.agent) }
			t.Cleanup(func() { agentUID = func() uint32 { return uint32(os.Geteuid()) } })
			lo, _, drains := serveBoth(t)
			c := testutil.DialAs(t, tc.client, lo)
			code, body := testutil.AskWithHost(t, c, lo, tc.method, tc.path, lo)
			if code != tc.want {
				t.Fatalf("%d %q, want %d", code, body, tc.want)
			}
			if code == http.StatusForbidden {
				if !strings.Contains(body, "comes from uid 64001") || !strings.Contains(body, "only root") {
					t.Errorf("the refusal does not say who asked and who may: %q", body)
				}
				if drains.Load() != 0 {
					t.Error("drained anyway")
				}
			}
		})
	}
}

// When the agent cannot tell who asked, a change is refused, saying why;
// reading goes on.
func TestChangesAreRefusedWhenTheUserIsUnknown(t *testing.T) {
	peerUID = func(*http.Request) (uint32, error) { return 0, errors.New("cannot read /proc/self/net/tcp") }
	t.Cleanup(func() { peerUID = tcpPeerUID })
	lo, _, drains := serveBoth(t)
	code, body := testutil.AskWithHost(t, nil, lo, "POST", "/drain", lo)
	if code != http.StatusForbidden || !strings.Contains(body, "cannot tell which user sent POST /drain (cannot read /proc/self/net/tcp)") || drains.Load() != 0 {
		t.Fatalf("%d %q, %d drains; want 403 saying why, and none", code, body, drains.Load())
	}
	if code, _ := testutil.AskWithHost(t, nil, lo, "GET", "/ready", lo); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /ready: %d", code)
	}
}

// The client's socket is found by its addresses; a socket no file refers
// to any more is not trusted: in TIME_WAIT the kernel shows uid 0
// whoever owned it, so a client that closes its socket at once must not
// pass for root.
func TestPeerUIDFromTheSocketTable(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	// 127.0.0.1:40000 (the client) → 127.0.0.1:9902 (the agent)
	const client, server = "0100007F:9C40", "0100007F:26AE"
	line := func(local, remote, st, uid, inode string) string {
		return "   0: " + local + " " + remote + " " + st + " 00000000:00000000 00:00000000 00000000  " + uid + "        0 " + inode + " 1 0000000000000000 100 0 0 10 0\n"
	}
	mapped := func(v4 string) string { return "0000000000000000FFFF0000" + v4 }
	cases := []struct {
		name      string
		tcp, tcp6 string
		want      uint32
		err       string
	}{
		{"the client's socket", line(server, client, "01", "998", "5551") + line(client, server, "01", "1001", "5552"), "", 1001, ""},
		{"the agent's own end is not the client's", line(server, client, "01", "998", "5551"), "", 0, "no socket"},
		{"a client closed at once (TIME_WAIT shows uid 0)", line(client, server, "06", "0", "0"), "", 0, "closed already"},
		{"a client closed at once (FIN_WAIT, no inode)", line(client, server, "05", "1001", "0"), "", 0, "closed already"},
		{"a dual-stack client in tcp6", "", line(mapped("0100007F:9C40"), mapped("0100007F:26AE"), "01", "1001", "5553"), 1001, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			netDir := filepath.Join(dir, "self", "net")
			os.MkdirAll(netDir, 0o755)
			os.WriteFile(filepath.Join(netDir, "tcp"), []byte(header+tc.tcp), 0o644)
			os.WriteFile(filepath.Join(netDir, "tcp6"), []byte(header+tc.tcp6), 0o644)
			old := procnet.Proc
			procnet.Proc = dir
			t.Cleanup(func() { procnet.Proc = old })
			r, _ := http.NewRequest("POST", "http://127.0.0.1:9902/drain", nil)
			r.RemoteAddr = "127.0.0.1:40000"
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9902}))
			uid, err := tcpPeerUID(r)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("uid %d, err %v; want an error with %q", uid, err, tc.err)
				}
				return
			}
			if err != nil || uid != tc.want {
				t.Fatalf("uid %d, err %v; want %d", uid, err, tc.want)
			}
		})
	}
}
