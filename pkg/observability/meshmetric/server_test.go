package meshmetric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
)

// admin stands in for Envoy's admin API: it records each query and
// answers with body or err.
type admin struct {
	mu      sync.Mutex
	queries []string
	body    string
	err     error
}

func (a *admin) stats(_ context.Context, query string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queries = append(a.queries, query)
	return a.body, a.err
}

func (a *admin) lastQuery() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queries[len(a.queries)-1]
}

func serve(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Path == "" {
		opts.Path = kumasock.MetricsHijacker(t.TempDir(), "zp-egress-1", "payments")
	}
	s, err := Serve(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type response struct {
	code        int
	contentType string
	body        string
}

func get(t *testing.T, sock, method, path string, header ...string) response {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://localhost"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

const textPlain004 = "text/plain; version=0.0.4; charset=utf-8"

func agentMetrics(w io.Writer) {
	io.WriteString(w, "# HELP zoneproxy_ready 1 while the agent reports READY.\n# TYPE zoneproxy_ready gauge\nzoneproxy_ready 1\n"+
		"# TYPE zoneproxy_envoy_exits_total counter\nzoneproxy_envoy_exits_total 0\n")
}

func TestScrapeAppliesThePolicyAndLabels(t *testing.T) {
	a := &admin{body: readFixture(t, "envoy-stats.prom")}
	s := serve(t, Options{Stats: a.stats, Extra: agentMetrics})
	s.SetConfig(mustParse(t, readFixture(t, "policy.json")))

	r := get(t, s.Path(), "GET", "/meshmetric")
	if r.code != 200 || r.contentType != textPlain004 {
		t.Fatalf("got %d %q: %s", r.code, r.contentType, r.body)
	}
	labels := `kuma_proxy_role="zone-egress",mesh="payments",zone="default"`
	for _, line := range []string{
		`envoy_cluster_upstream_cx_total{envoy_cluster_name="legacy-0123456789abcdef",` + labels + `} 3`,
		`envoy_cluster_upstream_cx_total{envoy_cluster_name="legacy-fedcba9876543210",` + labels + `} 4`,
		`envoy_cluster_upstream_rq_total{envoy_cluster_name="httpbin_80",` + labels + `} 7`,
		`envoy_server_live{` + labels + `} 1`,
		`my_custom_metric{` + labels + `} 42`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",` + labels + `,le="+Inf"} 7`,
		`envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="httpbin_80",` + labels + `} 21.5`,
		"zoneproxy_ready 1", // the agent's own, unlabelled
	} {
		if !strings.Contains(r.body, line+"\n") {
			t.Errorf("missing %s", line)
		}
	}
	for _, gone := range []string{"system_envoy_admin", "envoy_server_memory_allocated"} {
		if strings.Contains(r.body, gone) {
			t.Errorf("%s was served", gone)
		}
	}
	if _, err := ParseText(r.body); err != nil {
		t.Errorf("the answer is not valid text format: %v", err)
	}
}

func TestBeforeAnyConfigEverythingPassesUnlabelled(t *testing.T) {
	fixture := readFixture(t, "envoy-stats.prom")
	a := &admin{body: fixture}
	s := serve(t, Options{Stats: a.stats})
	r := get(t, s.Path(), "GET", "/meshmetric")
	want, _ := ParseText(fixture)
	got, err := ParseText(r.body)
	if r.code != 200 || err != nil || strings.Join(series(t, got), " ") != strings.Join(series(t, want), " ") {
		t.Errorf("got %d (%v):\n%s", r.code, err, r.body)
	}
	s.SetConfig(mustParse(t, readFixture(t, "policy.json")))
	s.SetConfig(nil)
	if r2 := get(t, s.Path(), "GET", "/meshmetric"); r2.body != r.body {
		t.Errorf("SetConfig(nil) did not go back to no policy:\n%s", r2.body)
	}
}

func TestIncludeUnusedDecidesUsedOnly(t *testing.T) {
	tests := []struct {
		name   string
		config string // "" = no config yet
		want   string
	}{
		{"no config yet", "", "format=prometheus&text_readouts="},
		{"includeUnused true", `{"observability":{"metrics":{"sidecar":{"includeUnused":true}}}}`, "format=prometheus&text_readouts="},
		{"includeUnused false", `{"observability":{"metrics":{"sidecar":{"includeUnused":false}}}}`, "format=prometheus&text_readouts=&usedonly="},
		{"no sidecar", `{"observability":{"metrics":{"backends":[]}}}`, "format=prometheus&text_readouts=&usedonly="},
	}
	a := &admin{body: "a 1\n"}
	s := serve(t, Options{Stats: a.stats})
	for _, tt := range tests {
		var c *Config
		if tt.config != "" {
			c = mustParse(t, tt.config)
		}
		s.SetConfig(c)
		if r := get(t, s.Path(), "GET", "/meshmetric"); r.code != 200 {
			t.Fatalf("%s: %d %s", tt.name, r.code, r.body)
		}
		if got := a.lastQuery(); got != tt.want {
			t.Errorf("%s: admin query %q, want %q", tt.name, got, tt.want)
		}
	}
}

// As kuma-dp's, the answer is Prometheus text whatever the scraper asks
// for: Prometheus asks for OpenMetrics first, which would rename Envoy's
// counters under the dashboards of users coming from kuma-dp.
func TestTextWhateverTheScraperAsksFor(t *testing.T) {
	a := &admin{body: readFixture(t, "envoy-stats.prom")}
	s := serve(t, Options{Stats: a.stats, Extra: agentMetrics})
	s.SetConfig(mustParse(t, readFixture(t, "policy.json")))
	for _, accept := range []string{
		"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",                                                                               // Prometheus 2
		"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1", // Prometheus 3
		"application/openmetrics-text",
		"text/plain",
		"",
	} {
		r := get(t, s.Path(), "GET", "/meshmetric", "Accept", accept)
		if r.code != 200 || r.contentType != textPlain004 {
			t.Errorf("Accept %q: %d %q, want %q", accept, r.code, r.contentType, textPlain004)
			continue
		}
		// Envoy's counter family keeps its name (OpenMetrics would drop the
		// _total from the family), and no # EOF ends the answer.
		line := "# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{envoy_cluster_name=\"httpbin_80\",kuma_proxy_role=\"zone-egress\",mesh=\"payments\",zone=\"default\"} 7\n"
		if !strings.Contains(r.body, line) || strings.Contains(r.body, "# EOF") {
			t.Errorf("Accept %q: not Envoy's names in text 0.0.4:\n%s", accept, r.body)
		}
	}
}

func TestOnlyMeshMetricPathsAreServed(t *testing.T) {
	a := &admin{body: "a 1\n"}
	s := serve(t, Options{Stats: a.stats})
	for _, tt := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/meshmetric", 200},
		{"GET", "/meshmetric/anything?x=1", 200},
		{"HEAD", "/meshmetric", 200},
		{"GET", "/metrics", 404},
		{"GET", "/stats", 404},
		{"GET", "/", 404},
		{"POST", "/meshmetric", 405},
	} {
		if r := get(t, s.Path(), tt.method, tt.path); r.code != tt.code {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, r.code, tt.code)
		}
	}
}

func TestAdminFailuresAnswer503WithAReason(t *testing.T) {
	tests := []struct {
		name, body string
		err        error
		want       string
	}{
		{"admin down", "", fmt.Errorf("dial unix /wd/kuma-envoy-admin.sock:\nconnect: connection refused"),
			"Envoy admin stats unavailable: dial unix /wd/kuma-envoy-admin.sock: connect: connection refused\n"},
		{"garbage", "a{b 1\n", nil, "Envoy admin stats unreadable: text format parsing error in line 1: expected '=' after label name, found '1'\n"},
	}
	for _, tt := range tests {
		a := &admin{body: tt.body, err: tt.err}
		s := serve(t, Options{Stats: a.stats})
		r := get(t, s.Path(), "GET", "/meshmetric")
		if r.code != 503 || !strings.HasPrefix(r.body, tt.want) || strings.Count(r.body, "\n") != 1 {
			t.Errorf("%s: %d %q, want 503 and one line starting %q", tt.name, r.code, r.body, tt.want)
		}
	}
}

func TestAdminReadIsBounded(t *testing.T) {
	sawDeadline := make(chan time.Duration, 1)
	slow := func(ctx context.Context, _ string) (string, error) {
		left := time.Duration(-1) // no deadline
		if dl, ok := ctx.Deadline(); ok {
			left = max(time.Until(dl), 0) // a stalled machine may already have passed it
		}
		sawDeadline <- left
		<-ctx.Done()
		return "", ctx.Err()
	}
	s := serve(t, Options{Stats: slow, Timeout: 100 * time.Millisecond})
	r := get(t, s.Path(), "GET", "/meshmetric")
	if left := <-sawDeadline; left < 0 || left > 100*time.Millisecond {
		t.Errorf("admin call had %v left (-1ns: no deadline), want a deadline of at most the 100ms timeout", left)
	}
	if r.code != 503 || !strings.Contains(r.body, context.DeadlineExceeded.Error()) {
		t.Errorf("got %d %q", r.code, r.body)
	}
}

func TestSocketReplacesStaleFilesIsPrivateAndGoesOnClose(t *testing.T) {
	for _, stale := range []string{"none", "file", "socket"} {
		t.Run(stale, func(t *testing.T) {
			path := kumasock.MetricsHijacker(t.TempDir(), "zp-egress-1", "payments")
			switch stale {
			case "file":
				if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			case "socket": // left by a killed run: bound, nobody listening
				ln, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				ln.(*net.UnixListener).SetUnlinkOnClose(false)
				ln.Close()
			}
			s, err := Serve(Options{Path: path, Stats: (&admin{body: "a 1\n"}).stats})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(path)
			if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
				t.Errorf("socket %v (%v), want a socket with mode 0600", fi.Mode(), err)
			}
			if r := get(t, path, "GET", "/meshmetric"); r.code != 200 {
				t.Errorf("scrape: %d", r.code)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket still there after Close: %v", err)
			}
			if s.Err() != nil {
				t.Errorf("Err after Close: %v", s.Err())
			}
		})
	}
}

func TestServeRefusesADirectoryAtThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kuma-mh-x-y.sock")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Serve(Options{Path: path, Stats: (&admin{}).stats})
	if err == nil || !strings.Contains(err.Error(), path+" is a directory") {
		t.Errorf("error %v, want one naming the directory", err)
	}
}
