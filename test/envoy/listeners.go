package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

type activeListener struct {
	name       string
	cfg        *listenerv3.Listener
	version    string
	updated    time.Time
	addr       string // Envoy's address string, e.g. 127.0.0.1:10000
	statPrefix string
	sock       *boundSocket
	conns      *connSet
	// live is the newest listener on this socket: an update that keeps the
	// socket takes the sockets accepted from then on.
	live *atomic.Pointer[activeListener]
	// runtime is the built filter chains: access logs, HTTP routes.
	runtime *listenerRuntime
	// Listener filters: tls_inspector (nil without one) and its timeout.
	inspector         *tlsInspector
	filtersTimeout    time.Duration
	continueOnTimeout bool
	static            bool
	afterInit         bool
	started           bool // listening and on the workers
	stopOnce          sync.Once
	stopped           bool
}

func (l *activeListener) inbound() bool {
	return l.cfg.GetTrafficDirection() == corev3.TrafficDirection_INBOUND
}

// stop closes the listening socket; accepted connections stay open, as with
// Envoy's stopListeners.
func (l *activeListener) stop() {
	l.stopOnce.Do(func() {
		l.stopped = true
		l.sock.close()
	})
}

// serve runs an accept loop per listening socket. With one socket per
// worker (reuse_port), a connection is on its socket's worker; workers
// sharing one socket take turns.
func (l *activeListener) serve(st *statStore, log *logger) {
	lns := l.sock.listenersToServe()
	for i, ln := range lns {
		worker := i
		if len(lns) == 1 {
			worker = anyWorker
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						continue
					}
					return
				}
				cur := l.live.Load()
				cur.conns.accept(c, worker)
				go cur.accepted(c, st, log)
			}
		}()
	}
}

// envoyAddr renders an Address like Network::Address::Instance::asString.
func envoyAddr(a *corev3.Address) (string, error) {
	switch t := a.GetAddress().(type) {
	case *corev3.Address_SocketAddress:
		ip, err := netip.ParseAddr(t.SocketAddress.GetAddress())
		if err != nil {
			return "", fmt.Errorf("malformed IP address: %s", t.SocketAddress.GetAddress())
		}
		return netip.AddrPortFrom(ip, uint16(t.SocketAddress.GetPortValue())).String(), nil
	case *corev3.Address_Pipe:
		return t.Pipe.GetPath(), nil
	case *corev3.Address_EnvoyInternalAddress:
		return "envoy://" + t.EnvoyInternalAddress.GetServerListenerName() + "/" + t.EnvoyInternalAddress.GetEndpointId(), nil
	}
	return "", errors.New("Address must be set: ")
}

// strerror renders an errno the way Envoy's errorDetails (strerror) does.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return strerror(pe.Err)
	}
	return err.Error()
}

// maxPipePath is sizeof(sockaddr_un.sun_path) minus the terminating NUL.
const maxPipePath = 107

func checkPipePath(p *corev3.Pipe) error {
	if len(p.GetPath()) > maxPipePath {
		return fmt.Errorf("Path \"%s\" exceeds maximum UNIX domain socket path size of %d.", p.GetPath(), maxPipePath+1)
	}
	if strings.HasPrefix(p.GetPath(), "@") && p.GetMode() != 0 {
		return errors.New("Cannot set mode for Abstract AF_UNIX sockets")
	}
	return nil
}

func bindKey(l *listenerv3.Listener) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(l.GetAddress())
	return fmt.Sprintf("%s|%v|%v", b, l.GetBindToPort().GetValue(), l.GetBindToPort() == nil)
}

// checkListener holds ListenerImpl's construction errors beyond PGV.
func checkListener(l *listenerv3.Listener, staticSecrets map[string]*tlsv3.Secret) error {
	if l.GetAddress() == nil && l.GetApiListener() == nil {
		return fmt.Errorf("error adding listener named '%s': address is necessary", l.GetName())
	}
	addr, err := envoyAddr(l.GetAddress())
	if err != nil {
		return err
	}
	if p := l.GetAddress().GetPipe(); p != nil {
		if err := checkPipePath(p); err != nil {
			return err
		}
	}
	chains := l.GetFilterChains()
	if len(chains) == 0 && l.GetDefaultFilterChain() == nil && l.GetApiListener() == nil &&
		l.GetAddress().GetSocketAddress().GetProtocol() != corev3.SocketAddress_UDP {
		return fmt.Errorf("error adding listener '%s': no filter chains specified", addr)
	}
	seen := map[string]string{}
	for _, fc := range chains {
		key, _ := proto.MarshalOptions{Deterministic: true}.Marshal(fc.GetFilterChainMatch())
		if prev, dup := seen[string(key)]; dup {
			return fmt.Errorf("error adding listener '%s': filter chain '%s' has the same matching rules defined as '%s'", addr, fc.GetName(), prev)
		}
		seen[string(key)] = fc.GetName()
	}
	all := append([]*listenerv3.FilterChain(nil), chains...)
	if l.GetDefaultFilterChain() != nil {
		all = append(all, l.GetDefaultFilterChain())
	}
	for _, fc := range all {
		if ts := fc.GetTransportSocket(); ts != nil {
			if err := checkTransportSocket(ts, staticSecrets); err != nil {
				return err
			}
		}
		if err := checkNetworkFilters(fc.GetFilters()); err != nil {
			return err
		}
	}
	return nil
}

// Network filters that end a chain (Config::Utility::validateTerminalFilters).
var terminalNetworkTypes = map[string]bool{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": true,
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":                            true,
	"envoy.extensions.filters.network.direct_response.v3.Config":                        true,
	"envoy.extensions.filters.network.redis_proxy.v3.RedisProxy":                        true,
	"envoy.extensions.filters.network.thrift_proxy.v3.ThriftProxy":                      true,
	"envoy.extensions.filters.network.dubbo_proxy.v3.DubboProxy":                        true,
	"envoy.extensions.filters.network.echo.v3.Echo":                                     true,
	"envoy.extensions.filters.network.generic_proxy.v3.GenericProxy":                    true,
}

const routerType = "envoy.extensions.filters.http.router.v3.Router"

func checkNetworkFilters(filters []*listenerv3.Filter) error {
	for i, f := range filters {
		t := typeName(f.GetTypedConfig().GetTypeUrl())
		if f.GetTypedConfig() == nil {
			continue
		}
		last := i == len(filters)-1
		if terminalNetworkTypes[t] && !last {
			return fmt.Errorf("Error: terminal filter named %s of type %s must be the last filter in a network filter chain.", f.GetName(), t)
		}
		if last && !terminalNetworkTypes[t] {
			return fmt.Errorf("Error: non-terminal filter named %s of type %s is the last filter in a network filter chain.", f.GetName(), t)
		}
		if t == "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
			msg, err := unpackAny(f.GetTypedConfig())
			if err != nil || msg == nil {
				continue
			}
			if hcm, ok := msg.(*hcmv3.HttpConnectionManager); ok {
				if err := checkHCM(hcm); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkHCM applies the HTTP filter chain rule: the router, and only the
// router, ends it.
func checkHCM(hcm *hcmv3.HttpConnectionManager) error {
	filters := hcm.GetHttpFilters()
	for i, f := range filters {
		t := typeName(f.GetTypedConfig().GetTypeUrl())
		if f.GetTypedConfig() == nil {
			continue
		}
		last := i == len(filters)-1
		if t == routerType && !last {
			return fmt.Errorf("Error: terminal filter named %s of type %s must be the last filter in a http filter chain.", f.GetName(), t)
		}
		if last && t != routerType {
			return fmt.Errorf("Error: non-terminal filter named %s of type %s is the last filter in a http filter chain.", f.GetName(), t)
		}
	}
	return nil
}
