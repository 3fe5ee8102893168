package envoy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// AdminAddress is where Envoy's admin API listens: a Unix socket path or
// a TCP host:port.
type AdminAddress struct {
	Socket string
	TCP    string
}

func (a AdminAddress) String() string {
	if a.Socket != "" {
		return "unix:" + a.Socket
	}
	return a.TCP
}

// Admin is a client of Envoy's admin API.
type Admin struct {
	addr      AdminAddress
	http      *http.Client
	base      string
	statsSize atomic.Int64 // the last /stats page's length
}

// NewAdmin returns a client; each call carries its own timeout.
func NewAdmin(addr AdminAddress) *Admin {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	base := "http://" + addr.TCP
	if addr.Socket != "" {
		base = "http://envoy-admin"
		sock := addr.Socket
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
	}
	return &Admin{addr: addr, http: &http.Client{Transport: tr}, base: base}
}

// Address is where this client connects.
func (a *Admin) Address() AdminAddress { return a.addr }

func (a *Admin) do(ctx context.Context, method, path string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode, string(b), err
}

// Ready asks /ready. It returns Envoy's state word (LIVE, DRAINING,
// PRE_INITIALIZING, INITIALIZING) and whether Envoy answered 200.
func (a *Admin) Ready(ctx context.Context) (state string, live bool, err error) {
	code, body, err := a.do(ctx, http.MethodGet, "/ready", time.Second)
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(body), code == http.StatusOK, nil
}

// FailHealthChecks makes Envoy fail health checks, the first step of a drain.
func (a *Admin) FailHealthChecks(ctx context.Context) error {
	return a.post(ctx, "/healthcheck/fail")
}

// DrainListeners starts a graceful drain of every listener.
func (a *Admin) DrainListeners(ctx context.Context) error {
	return a.post(ctx, "/drain_listeners?graceful")
}

// StopListeners closes every listener now (a drain without the drain
// period): new connections are refused, open ones stay. Envoy never opens
// them again, not even for listeners that LDS sends later.
func (a *Admin) StopListeners(ctx context.Context) error {
	return a.post(ctx, "/drain_listeners")
}

// SetLogLevel changes Envoy's log level at runtime: a level for every
// logger, or (with component set) for one.
func (a *Admin) SetLogLevel(ctx context.Context, component, level string) error {
	q := url.Values{}
	if component == "" {
		q.Set("level", level)
	} else {
		q.Set(component, level)
	}
	return a.post(ctx, "/logging?"+q.Encode())
}

func (a *Admin) post(ctx context.Context, path string) error {
	code, body, err := a.do(ctx, http.MethodPost, path, 5*time.Second)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, code, strings.TrimSpace(body))
	}
	return nil
}

// DownstreamConnections counts what a drain waits for: connections open
// on Envoy's listeners plus sockets still in a listener filter (the TLS
// inspector), not counting the admin listener.
func (a *Admin) DownstreamConnections(ctx context.Context) (int, error) {
	q := url.Values{"filter": {`^listener\..*\.downstream_(pre_)?cx_active$`}}
	code, body, err := a.do(ctx, http.MethodGet, "/stats?"+q.Encode(), 2*time.Second)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET /stats: %d", code)
	}
	return SumListenerConnections(body)
}

// SumListenerConnections reads `listener.<name>.downstream_cx_active: N` and
// `….downstream_pre_cx_active: N` lines of Envoy's text stats. Envoy also
// reports each listener per worker (`listener.<name>.worker_<n>.…`) and the
// admin listener's main thread; those repeat the totals and are skipped.
func SumListenerConnections(stats string) (int, error) {
	total := 0
	sc := bufio.NewScanner(strings.NewReader(stats))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || !countedListenerStat(name) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil {
			return 0, fmt.Errorf("stat %s: %w", name, err)
		}
		total += n
	}
	return total, sc.Err()
}

func countedListenerStat(name string) bool {
	rest, ok := strings.CutPrefix(name, "listener.")
	if !ok || strings.HasPrefix(rest, "admin.") {
		return false
	}
	scope, ok := strings.CutSuffix(rest, ".downstream_cx_active")
	if !ok {
		scope, ok = strings.CutSuffix(rest, ".downstream_pre_cx_active")
	}
	if !ok {
		return false
	}
	last := scope[strings.LastIndexByte(scope, '.')+1:]
	if last == "main_thread" {
		return false
	}
	if n, isWorker := strings.CutPrefix(last, "worker_"); isWorker {
		if _, err := strconv.Atoi(n); err == nil {
			return false
		}
	}
	return true
}

// Listener is one of Envoy's listeners as GET /listeners reports it.
type Listener struct {
	Name    string
	Address string // host:port, or a pipe's path
}

// Listeners lists the listeners Envoy has now (GET /listeners, whose text
// form is one `name::address` a line).
func (a *Admin) Listeners(ctx context.Context) ([]Listener, error) {
	body, err := a.get(ctx, "/listeners", 2*time.Second)
	if err != nil {
		return nil, err
	}
	var out []Listener
	for _, line := range strings.Split(body, "\n") {
		if name, addr, ok := strings.Cut(strings.TrimSpace(line), "::"); ok && name != "" {
			out = append(out, Listener{Name: name, Address: addr})
		}
	}
	return out, nil
}

// Stats answers GET /stats?<query>, e.g. the MeshMetric hijacker's
// `format=prometheus&text_readouts=&usedonly=`. Envoy sends no length, and
// the page is megabytes: it is read into a buffer sized from the last one.
func (a *Admin) Stats(ctx context.Context, query string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/stats?"+query, nil)
	if err != nil {
		return "", err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	b.Grow(int(a.statsSize.Load()) + 64<<10)
	if _, err := io.Copy(&b, io.LimitReader(resp.Body, int64(maxStatsBytes)+1)); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /stats: %d %s", resp.StatusCode, strings.TrimSpace(errtext.Truncate(b.String(), 512)))
	}
	if b.Len() > maxStatsBytes {
		// A cut page would end in a cut sample: a wrong value, or
		// histograms (last on the page) silently missing.
		return "", fmt.Errorf("GET /stats: the page is larger than %d bytes; not read", maxStatsBytes)
	}
	a.statsSize.Store(int64(b.Len()))
	return b.String(), nil
}

// maxStatsBytes bounds a /stats page the agent reads: about 6,000 clusters.
var maxStatsBytes = 64 << 20 // a variable for the tests

// PrometheusStats returns Envoy's own metrics in Prometheus text format.
func (a *Admin) PrometheusStats(ctx context.Context) (string, error) {
	return a.get(ctx, "/stats/prometheus", 5*time.Second)
}

// get is a GET that only a 200 answers.
func (a *Admin) get(ctx context.Context, path string, timeout time.Duration) (string, error) {
	code, body, err := a.do(ctx, http.MethodGet, path, timeout)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", errors.New("GET " + path + ": " + strconv.Itoa(code))
	}
	return body, nil
}

// Build is the build string the running Envoy reports (/server_info's
// version), the same string `envoy --version` prints after "version: ".
func (a *Admin) Build(ctx context.Context) (string, error) {
	body, err := a.get(ctx, "/server_info", 2*time.Second)
	if err != nil {
		return "", err
	}
	var info struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return "", fmt.Errorf("GET /server_info: %w", err)
	}
	return info.Version, nil
}

// Close drops idle connections.
func (a *Admin) Close() { a.http.CloseIdleConnections() }
