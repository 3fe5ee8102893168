package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// zoneListener is shaped like kuma's zone listeners: tls_inspector and one
// chain for a TLS ClientHello naming sni.
func zoneListener(t *testing.T, name string, port int, sni string) *listenerv3.Listener {
	t.Helper()
	l := tcpProxyListener(t, name, port, "backend")
	ti, err := anypb.New(&tlsinspectorv3.TlsInspector{})
	if err != nil {
		t.Fatal(err)
	}
	l.StatPrefix = name
	l.ListenerFilters = []*listenerv3.ListenerFilter{{
		Name: "envoy.filters.listener.tls_inspector", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: ti},
	}}
	l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{sni}, TransportProtocol: "tls"}
	return l
}

var errHelloSent = errors.New("client hello sent")

// helloOnly lets a TLS client write its ClientHello, then ends the
// handshake without waiting for an answer.
type helloOnly struct{ net.Conn }

func (helloOnly) Read([]byte) (int, error) { return 0, errHelloSent }

// sendClientHello connects to port and sends a TLS ClientHello for sni;
// the connection stays open.
func sendClientHello(t *testing.T, port int, sni string) net.Conn {
	t.Helper()
	c := dialPort(t, port)
	err := tls.Client(helloOnly{c}, &tls.Config{ServerName: sni, NextProtos: []string{"h2"}}).Handshake()
	if !errors.Is(err, errHelloSent) {
		t.Fatalf("sending the ClientHello: %v", err)
	}
	return c
}

// closedByPeer reports whether the stand-in closed c within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || (err != nil && strings.Contains(err.Error(), "reset"))
}

func TestTLSInspectorGatesConnections(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	port, lenient := freePort(t), freePort(t)
	zone := zoneListener(t, "zone", port, "sni.extsvc.payments.default.httpbin.80")
	zone.ListenerFiltersTimeout = durationpb.New(time.Second)
	// On timeout this one goes on to a chain that takes raw bytes.
	fallback := tcpProxyListener(t, "fallback", lenient, "backend")
	fallback.StatPrefix = "fallback"
	fallback.ListenerFilters = zone.ListenerFilters
	fallback.ListenerFiltersTimeout = durationpb.New(time.Second)
	fallback.ContinueOnListenerFiltersTimeout = true
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{zone, fallback})
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	stat := func(name string) int64 { return statValue(t, sock, "listener.zone."+name) }

	// A bare TCP connection waits in the listener filters: not a connection.
	bare, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	waitFor(t, 5*time.Second, "downstream_pre_cx_active 1", func() bool { return stat("downstream_pre_cx_active") == 1 })
	if v := stat("downstream_cx_active"); v != 0 {
		t.Fatalf("a socket without a ClientHello counts as downstream_cx_active %d", v)
	}
	// After listener_filters_timeout it is closed, never having been a connection.
	if !closedByPeer(bare, 10*time.Second) {
		t.Fatal("the socket without a ClientHello was not closed after listener_filters_timeout")
	}
	waitFor(t, 5*time.Second, "downstream_pre_cx_timeout 1", func() bool { return stat("downstream_pre_cx_timeout") == 1 })
	if stat("downstream_pre_cx_active") != 0 || stat("downstream_cx_total") != 0 {
		t.Fatal("the timed-out socket is still counted, or was counted as a connection")
	}

	// A ClientHello for the chain's SNI makes a connection.
	held := sendClientHello(t, port, "sni.extsvc.payments.default.httpbin.80")
	waitFor(t, 5*time.Second, "downstream_cx_active 1", func() bool { return stat("downstream_cx_active") == 1 })
	if stat("downstream_pre_cx_active") != 0 || statValue(t, sock, "tls_inspector.sni_found") != 1 || statValue(t, sock, "tls_inspector.alpn_found") != 1 {
		t.Fatal("the inspected connection is not accounted as Envoy does")
	}
	if closedByPeer(held, 1500*time.Millisecond) {
		t.Fatal("a connection that matched a chain was closed by the listener filter timeout")
	}
	// Envoy matches the SNI in lower case.
	sendClientHello(t, port, "SNI.ExtSvc.payments.default.httpbin.80")
	waitFor(t, 5*time.Second, "downstream_cx_active 2", func() bool { return stat("downstream_cx_active") == 2 })

	// Another SNI, or bytes that are not TLS, match no chain: closed.
	other := sendClientHello(t, port, "sni.extsvc.payments.default.other.80")
	if !closedByPeer(other, 5*time.Second) {
		t.Fatal("a ClientHello for an unknown SNI was kept")
	}
	plain, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	fmt.Fprint(plain, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if !closedByPeer(plain, 5*time.Second) {
		t.Fatal("plain text matched a chain that requires TLS")
	}
	waitFor(t, 5*time.Second, "no_filter_chain_match 2", func() bool { return stat("no_filter_chain_match") == 2 })
	if statValue(t, sock, "tls_inspector.tls_not_found") != 1 || stat("downstream_cx_active") != 2 {
		t.Fatal("unmatched sockets were counted")
	}

	// continue_on_listener_filters_timeout: the silent socket becomes a
	// raw_buffer connection once the timeout passes.
	quiet, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", lenient))
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	waitFor(t, 10*time.Second, "fallback connection", func() bool {
		return statValue(t, sock, "listener.fallback.downstream_cx_active") == 1
	})
	if statValue(t, sock, "listener.fallback.downstream_pre_cx_timeout") != 1 {
		t.Fatal("the fallback did not come from the timeout")
	}
}

func TestListenerFilterTimeoutDefault(t *testing.T) {
	l := &listenerv3.Listener{}
	if d := listenerFiltersTimeout(l); d != 15*time.Second {
		t.Fatalf("default listener_filters_timeout %s, Envoy's is 15s", d)
	}
	l.ListenerFiltersTimeout = durationpb.New(0)
	if d := listenerFiltersTimeout(l); d != 0 {
		t.Fatalf("0 must turn the timeout off, got %s", d)
	}
}
