package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func hcmListener(t *testing.T, name string, addr *corev3.Address, rc *routev3.RouteConfiguration, logs ...*accesslogv3.AccessLog) *listenerv3.Listener {
	t.Helper()
	router, _ := anypb.New(&routerv3.Router{})
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     name,
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		AccessLog:      logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{
		Name:    name,
		Address: addr,
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
}

func pipeAddr(path string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}
}

// dynconfRoutes is kuma's dynconf route pair for body at /meshmetric.
func dynconfRoutes(body string) *routev3.RouteConfiguration {
	sum := sha256.Sum256([]byte(body))
	etag := hex.EncodeToString(sum[:])
	return &routev3.RouteConfiguration{
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(uint32(len(body))),
		VirtualHosts: []*routev3.VirtualHost{{Name: "system_dynamicconfig", Domains: []string{"*"}, Routes: []*routev3.Route{
			{
				Name:   "system_dynamicconfig_meshmetric_not_modified",
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/meshmetric"}, Headers: []*routev3.HeaderMatcher{exactHeader("If-None-Match", etag)}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 304}},
			},
			{
				Name:                 "system_dynamicconfig_meshmetric",
				Match:                &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/meshmetric"}},
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "Etag", Value: etag}}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
					Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
				}},
			},
		}}},
	}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func get(t *testing.T, c *http.Client, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestDynconfListenerAnswers200304And404(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "kuma-mesh-metric-config.sock")
	body := `{"observability":{"metrics":{"applications":null,"backends":[{"type":"Prometheus","name":null}],"extraLabels":{"mesh":"payments"}}}}`
	sum := sha256.Sum256([]byte(body))
	etag := hex.EncodeToString(sum[:])
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")},
		[]types.Resource{hcmListener(t, "system_dynamicconfig", pipeAddr(sock), dynconfRoutes(body))})
	startWithCPArgs(t, cp)
	waitFor(t, 10*time.Second, "LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) >= 1 })
	c := unixClient(sock)

	resp, got := get(t, c, "http://localhost/meshmetric", nil)
	if resp.StatusCode != 200 || got != body || resp.Header.Get("Etag") != etag {
		t.Errorf("first fetch: %d Etag=%q body %q", resp.StatusCode, resp.Header.Get("Etag"), got)
	}
	if resp.Header.Get("Server") != "envoy" {
		t.Errorf("Server %q", resp.Header.Get("Server"))
	}
	resp, got = get(t, c, "http://localhost/meshmetric", map[string]string{"If-None-Match": etag})
	if resp.StatusCode != 304 || got != "" {
		t.Errorf("unchanged: %d %q", resp.StatusCode, got)
	}
	resp, got = get(t, c, "http://localhost/meshmetric", map[string]string{"If-None-Match": "stale"})
	if resp.StatusCode != 200 || got != body {
		t.Errorf("stale etag: %d %q", resp.StatusCode, got)
	}
	if resp, _ = get(t, c, "http://localhost/otel", nil); resp.StatusCode != 404 {
		t.Errorf("/otel: %d, want 404", resp.StatusCode)
	}
}

func TestDirectResponseOverTheBodyLimitIsNACKed(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	rc := dynconfRoutes("0123456789")
	rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(4)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")},
		[]types.Resource{hcmListener(t, "dc", pipeAddr(filepath.Join(shortTempDir(t), "dc.sock")), rc)})
	startWithCPArgs(t, cp)
	waitFor(t, 10*time.Second, "NACK", func() bool { return cp.nackSeen("dc: response body size is 10 bytes; maximum is 4") })
}

// pipeCluster is kuma's hijacker cluster: STATIC, one pipe endpoint.
func pipeCluster(name, path string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(5 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: pipeAddr(path)}}}},
		}}},
	}
}

func TestPrometheusListenerForwardsToTheHijackerSocket(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	dir := shortTempDir(t)

	// The agent's hijacker: records what reaches it.
	hijacker := filepath.Join(dir, "kuma-mh-zp-egress-1-payments.sock")
	ln, err := net.Listen("unix", hijacker)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "envoy_server_live 1\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	const name = "system_meshmetric_prometheus_default-backend"
	port := freePort(t)
	rc := &routev3.RouteConfiguration{
		ValidateClusters: wrapperspb.Bool(false),
		VirtualHosts: []*routev3.VirtualHost{{Name: name, Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/metrics"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}, PrefixRewrite: "/meshmetric",
			}},
		}}}},
	}
	logPath := filepath.Join(dir, "http.log")
	l := hcmListener(t, name, &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}, rc, fileLog(t, logPath, &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
		TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %UPSTREAM_CLUSTER% %UPSTREAM_HOST%\n"}},
	}}))
	l.EnableReusePort = wrapperspb.Bool(true)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend"), pipeCluster(name, hijacker)}, []types.Resource{l})
	startWithCPArgs(t, cp, fastFlush...)
	waitFor(t, 10*time.Second, "LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) >= 1 })

	resp, body := get(t, &http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/metrics?x=1", port), nil)
	if resp.StatusCode != 200 || body != "envoy_server_live 1\n" {
		t.Fatalf("scrape: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Server") != "envoy" || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4" {
		t.Errorf("headers %v", resp.Header)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0] != "/meshmetric?x=1" {
		t.Errorf("hijacker saw %v, want [/meshmetric?x=1]", seen)
	}
	mu.Unlock()
	if resp, _ := get(t, &http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/stats", port), nil); resp.StatusCode != 404 {
		t.Errorf("/stats: %d, want 404 (no route)", resp.StatusCode)
	}
	want := fmt.Sprintf("GET /metrics?x=1 200 %s %s\nGET /stats 404 - -\n", name, hijacker)
	waitFor(t, 5*time.Second, "HTTP access log", func() bool { b, _ := os.ReadFile(logPath); return string(b) == want })

	// enable_reuse_port is a real SO_REUSEPORT: another socket with it can
	// bind the same port.
	if err := bindReusePort(port); err != nil {
		t.Errorf("SO_REUSEPORT bind next to the listener: %v", err)
	}

	// With the hijacker gone, the scrape fails like Envoy's upstream error.
	srv.Close()
	os.Remove(hijacker)
	resp, body = get(t, &http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if resp.StatusCode != 503 || !strings.HasPrefix(body, "upstream connect error or disconnect/reset before headers.") {
		t.Errorf("hijacker down: %d %q", resp.StatusCode, body)
	}
}

func TestReusePortOffKeepsThePortExclusive(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	port := freePort(t)
	l := tcpProxyListener(t, "exclusive", port, "backend")
	l.EnableReusePort = wrapperspb.Bool(false)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{l})
	_, sock, _ := startWithCPArgs(t, cp)
	// LIVE: the listener listens (a bound socket alone lets a second
	// SO_REUSEADDR socket bind).
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	if err := bindReusePort(port); err == nil {
		t.Error("a SO_REUSEPORT socket could bind the port of a listener with enable_reuse_port false")
	}
}

// bindReusePort binds (and closes) a listening socket with SO_REUSEPORT.
func bindReusePort(port int) error {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return ln.Close()
}
