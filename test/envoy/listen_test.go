package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// warmUp is a listener that is not warm until a resource of another type
// (its route config or its secret) arrives, and that resource.
type warmUp struct {
	name     string
	listener func(t *testing.T, p *pki, port int) *listenerv3.Listener
	needs    func(t *testing.T, p *pki) map[resource.Type][]types.Resource
}

var warmUps = []warmUp{
	{"RDS", rdsListener, func(*testing.T, *pki) map[resource.Type][]types.Resource {
		return map[resource.Type][]types.Resource{resource.RouteType: {zoneRoutes()}}
	}},
	{"SDS", sdsListener, func(t *testing.T, p *pki) map[resource.Type][]types.Resource {
		return map[resource.Type][]types.Resource{resource.SecretType: {identitySecret(t, p)}}
	}},
}

// Envoy binds a listener's sockets when it creates the listener but calls
// listen() only when its workers start (right before LIVE) or, for a
// listener added later, once that listener warmed. Until then the port is
// taken but the kernel refuses connections to it.
func TestListenerRefusedUntilStarted(t *testing.T) {
	for _, w := range warmUps {
		for _, later := range []bool{false, true} {
			when := "at start-up"
			if later {
				when = "added later"
			}
			t.Run(w.name+" "+when, func(t *testing.T) {
				p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
				cp := newTestCP(t, p, "127.0.0.1:0")
				port := freePort(t)
				first := tcpProxyListener(t, "first", freePort(t), "backend")
				waiting := w.listener(t, p, port)
				base := map[resource.Type][]types.Resource{resource.ClusterType: {staticCluster("backend")}}
				withListeners := func(ls ...types.Resource) map[resource.Type][]types.Resource {
					out := map[resource.Type][]types.Resource{resource.ListenerType: ls}
					for k, v := range base {
						out[k] = v
					}
					return out
				}
				var sock string
				if later {
					cp.setResources(t, "v1", withListeners(first))
					_, sock, _ = startWithCPArgs(t, cp, "--concurrency", "2")
					waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
					cp.setResources(t, "v2", withListeners(first, waiting))
					waitFor(t, 10*time.Second, "the listener warming", func() bool {
						return statValue(t, sock, "listener_manager.total_listeners_warming") == 1
					})
				} else {
					cp.setResources(t, "v1", withListeners(waiting))
					_, sock, _ = startWithCPArgs(t, cp, "--concurrency", "2")
					waitFor(t, 10*time.Second, "the LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) >= 1 })
					if body := readyBody(sock); body != "INITIALIZING\n" {
						t.Fatalf("/ready while the listener waits for %s = %q", w.name, body)
					}
				}

				if err := bindPlain(port); !errors.Is(err, syscall.EADDRINUSE) {
					t.Errorf("a plain bind of the listener's port: %v; want EADDRINUSE (bound)", err)
				}
				if err := dialErr(port); !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("connect before the listener started: %v; want ECONNREFUSED", err)
				}
				if n := listenSockets(t, port); n != 0 {
					t.Errorf("%d sockets listen on the port before the listener started", n)
				}

				for k, v := range w.needs(t, p) {
					base[k] = v
				}
				if later {
					cp.setResources(t, "v3", withListeners(first, waiting))
					waitFor(t, 10*time.Second, "the listener warm", func() bool {
						return statValue(t, sock, "listener_manager.total_listeners_warming") == 0
					})
				} else {
					cp.setResources(t, "v2", withListeners(waiting))
					waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
				}
				if err := dialErr(port); err != nil {
					t.Errorf("connect once the listener started: %v", err)
				}
				if n := listenSockets(t, port); n != 2 {
					t.Errorf("%d sockets listen with --concurrency 2; want 2", n)
				}
			})
		}
	}
}

// A second Envoy beside a LIVE one on the same SO_REUSEPORT address has its
// sockets bound while it initializes, but they take no connection before
// it is LIVE: the kernel hands every new connection to the first one.
func TestNewEnvoyTakesNoConnectionsBeforeLive(t *testing.T) {
	port := freePort(t)
	serving := map[resource.Type][]types.Resource{
		resource.ClusterType:  {staticCluster("backend")},
		resource.RouteType:    {zoneRoutes()},
		resource.ListenerType: {rdsListener(t, nil, port)},
	}
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	oldCP := newTestCP(t, p, "127.0.0.1:0")
	oldCP.setResources(t, "v1", serving)
	_, oldSock, _ := startWithCPArgs(t, oldCP)
	waitFor(t, 10*time.Second, "the old Envoy LIVE", func() bool { return readyBody(oldSock) == "LIVE\n" })

	newCP := newTestCP(t, p, "127.0.0.1:0")
	newCP.setResources(t, "v1", map[resource.Type][]types.Resource{
		resource.ClusterType:  serving[resource.ClusterType],
		resource.ListenerType: serving[resource.ListenerType],
	})
	_, newSock, _ := startWithCPArgs(t, newCP)
	waitFor(t, 10*time.Second, "the new Envoy's LDS ACK", func() bool { return newCP.ackCount(resource.ListenerType) >= 1 })
	total := func(sock string) int64 {
		return max(0, statValue(t, sock, fmt.Sprintf("listener.127.0.0.1_%d.downstream_cx_total", port)))
	}

	const n = 32
	for range n {
		dialPort(t, port)
	}
	waitFor(t, 5*time.Second, "every connection on the old Envoy", func() bool { return total(oldSock) == n })
	if got := total(newSock); got != 0 {
		t.Fatalf("the initializing Envoy accepted %d connections", got)
	}
	if body := readyBody(newSock); body != "INITIALIZING\n" {
		t.Fatalf("the new Envoy's /ready = %q", body)
	}

	newCP.setResources(t, "v2", serving)
	waitFor(t, 10*time.Second, "the new Envoy LIVE", func() bool { return readyBody(newSock) == "LIVE\n" })
	// Now the kernel spreads new connections over both.
	for i := 0; total(newSock) == 0; i++ {
		if i == 64 {
			t.Fatal("64 connections after LIVE and none on the new Envoy")
		}
		dialPort(t, port)
		waitFor(t, 5*time.Second, "the connection counted", func() bool { return total(oldSock)+total(newSock) == int64(n+i+1) })
	}
}

// Without SO_REUSEPORT, a socket that is bound but not listening does not
// keep another SO_REUSEADDR socket from binding the port (Linux checks
// again at listen()). So a second Envoy binds while the first initializes,
// and whichever calls listen() second fails: Envoy logs it and removes that
// listener, the server goes LIVE without it.
func TestListenFailureRemovesTheListener(t *testing.T) {
	port := freePort(t)
	exclusive := rdsListener(t, nil, port)
	exclusive.EnableReusePort = wrapperspb.Bool(false)
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	firstCP := newTestCP(t, p, "127.0.0.1:0")
	firstCP.setResources(t, "v1", map[resource.Type][]types.Resource{
		resource.ClusterType:  {staticCluster("backend")},
		resource.ListenerType: {exclusive},
	})
	first, firstSock, _ := startWithCPArgs(t, firstCP)
	waitFor(t, 10*time.Second, "the first Envoy's LDS ACK", func() bool { return firstCP.ackCount(resource.ListenerType) >= 1 })

	serving := map[resource.Type][]types.Resource{
		resource.ClusterType:  {staticCluster("backend")},
		resource.RouteType:    {zoneRoutes()},
		resource.ListenerType: {exclusive},
	}
	secondCP := newTestCP(t, p, "127.0.0.1:0")
	secondCP.setResources(t, "v1", serving)
	_, secondSock, _ := startWithCPArgs(t, secondCP)
	waitFor(t, 10*time.Second, "the second Envoy LIVE", func() bool { return readyBody(secondSock) == "LIVE\n" })
	if secondCP.nackSeen("cannot bind") {
		t.Fatal("the second Envoy's bind failed while the first one only had its socket bound")
	}

	firstCP.setResources(t, "v2", serving)
	waitFor(t, 10*time.Second, "the first Envoy LIVE", func() bool { return readyBody(firstSock) == "LIVE\n" })
	want := "final pre-worker listener init for listener 'zone_http' failed: cannot listen() errno=98"
	waitFor(t, 5*time.Second, "the listen() failure logged", func() bool { return strings.Contains(first.stderr.String(), want) })
	for name, v := range map[string]int64{
		"listener_manager.listener_create_failure": 1,
		"listener_manager.listener_removed":        1,
		"listener_manager.total_listeners_active":  0,
	} {
		if got := statValue(t, firstSock, name); got != v {
			t.Errorf("the first Envoy's %s = %d; want %d", name, got, v)
		}
	}
	if err := dialErr(port); err != nil {
		t.Errorf("the second Envoy's listener: %v", err)
	}
}

// An update of a listener that keeps its address warms beside the active
// version, which keeps taking connections (on the same sockets) with its
// own routes until the new version is warm.
func TestUpdatedListenerServesTheOldVersionUntilWarm(t *testing.T) {
	port := freePort(t)
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	clusters := []types.Resource{staticCluster("backend")}
	cp.setResources(t, "v1", map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.RouteType:    {directRoutes("routes_v1", 200)},
		resource.ListenerType: {rdsListenerFor(t, port, "routes_v1")},
	})
	_, sock, _ := startWithCPArgs(t, cp)
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	status := func() int {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, _ := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		return resp.StatusCode
	}
	if got := status(); got != 200 {
		t.Fatalf("version 1 answers %d; want 200", got)
	}

	cp.setResources(t, "v2", map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.RouteType:    {directRoutes("routes_v1", 200)},
		resource.ListenerType: {rdsListenerFor(t, port, "routes_v2")},
	})
	waitFor(t, 10*time.Second, "version 2 warming", func() bool {
		return statValue(t, sock, "listener_manager.total_listeners_warming") == 1
	})
	if got := status(); got != 200 {
		t.Fatalf("while version 2 warms the listener answers %d; want version 1's 200", got)
	}
	_, dump := adminDo(t, sock, "GET", "/config_dump?resource=dynamic_listeners")
	if !strings.Contains(dump, `"active_state"`) || !strings.Contains(dump, `"warming_state"`) {
		t.Errorf("config dump while version 2 warms lacks an active and a warming state:\n%s", dump)
	}

	cp.setResources(t, "v3", map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.RouteType:    {directRoutes("routes_v2", 201)},
		resource.ListenerType: {rdsListenerFor(t, port, "routes_v2")},
	})
	waitFor(t, 10*time.Second, "version 2 warm", func() bool {
		return statValue(t, sock, "listener_manager.total_listeners_warming") == 0
	})
	if got := status(); got != 201 {
		t.Fatalf("version 2 answers %d; want 201", got)
	}
}

// With reuse_port Envoy opens one listen socket per worker, so two Envoys
// share a port by their numbers of sockets; without it the workers share
// one socket.
func TestListenSocketsPerWorker(t *testing.T) {
	for _, tt := range []struct {
		name      string
		reusePort *wrapperspb.BoolValue
		want      int
	}{
		{"reuse_port unset", nil, 3},
		{"reuse_port true", wrapperspb.Bool(true), 3},
		{"reuse_port false", wrapperspb.Bool(false), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
			cp := newTestCP(t, p, "127.0.0.1:0")
			port := freePort(t)
			l := tcpProxyListener(t, "zone", port, "backend")
			l.EnableReusePort = tt.reusePort
			cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{l})
			_, sock, _ := startWithCPArgs(t, cp, "--concurrency", "3")
			waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
			if got := listenSockets(t, port); got != tt.want {
				t.Fatalf("%d listen sockets on the port with --concurrency 3; want %d", got, tt.want)
			}
		})
	}
}

// setResources replaces what cp serves.
func (cp *testCP) setResources(t *testing.T, version string, res map[resource.Type][]types.Resource) {
	t.Helper()
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap); err != nil {
		t.Fatal(err)
	}
}

// adsNoTimeout is an ADS config source that waits for its resource for
// ever, so a test decides when the listener warms.
var adsNoTimeout = &corev3.ConfigSource{
	ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	ResourceApiVersion:    corev3.ApiVersion_V3,
	InitialFetchTimeout:   durationpb.New(0),
}

const zoneRoutesName = "zone_routes"

func rdsListener(t *testing.T, _ *pki, port int) *listenerv3.Listener {
	t.Helper()
	return rdsListenerFor(t, port, zoneRoutesName)
}

// rdsListenerFor is an HTTP listener whose routes come over RDS as routes.
func rdsListenerFor(t *testing.T, port int, routes string) *listenerv3.Listener {
	t.Helper()
	router, _ := anypb.New(&routerv3.Router{})
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:  "zone_http",
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: routes, ConfigSource: adsNoTimeout,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{
		Name:    "zone_http",
		Address: tcpAddr(port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
}

func zoneRoutes() *routev3.RouteConfiguration { return directRoutes(zoneRoutesName, 200) }

// directRoutes answers every request with status.
func directRoutes(name string, status uint32) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: status}},
		}},
	}}}
}

const identityName = "zone_identity"

func sdsListener(t *testing.T, _ *pki, port int) *listenerv3.Listener {
	t.Helper()
	dtc, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: identityName, SdsConfig: adsNoTimeout}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := tcpProxyListener(t, "zone_tls", port, "backend")
	l.FilterChains[0].TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: dtc}}
	return l
}

func identitySecret(t *testing.T, p *pki) *tlsv3.Secret {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(p.serverCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsv3.Secret{Name: identityName, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.serverCert.Certificate[0]})}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}},
	}}}
}

func tcpAddr(port int) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

// dialErr is the error of a connect to 127.0.0.1:port (nil: accepted).
func dialErr(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// bindPlain binds 127.0.0.1:port without SO_REUSEADDR or SO_REUSEPORT: it
// fails while any socket is bound there, listening or not.
func bindPlain(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// listenSockets counts the distinct sockets (inodes) in LISTEN state on
// port in /proc/net/tcp; a dup()ed socket counts once.
func listenSockets(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, hexPort, _ := strings.Cut(fields[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
			inodes[fields[9]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return len(inodes)
}
