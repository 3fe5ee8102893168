package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
)

const (
	tlsInspectorType = "envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"
	// ListenerImpl's default when listener_filters_timeout is unset.
	defaultListenerFiltersTimeout = 15 * time.Second
	// TLS_MAX_CLIENT_HELLO (SSL3_RT_MAX_PLAIN_LENGTH) in Envoy 1.39.
	maxClientHello = 16 << 10
)

// socketInfo is what the listener filters learn about a new socket; the
// filter chain is chosen from it.
type socketInfo struct {
	local, remote net.Addr
	transport     string // "tls" from tls_inspector, else "raw_buffer"
	serverName    string
	alpn          []string
}

// tlsInspector is a configured envoy.filters.listener.tls_inspector.
type tlsInspector struct {
	maxHello   int
	closeOnErr bool
}

// listenerTLSInspector returns the listener's tls_inspector, if it has one.
// Other listener filters are not modelled and let every socket through.
func listenerTLSInspector(l *listenerv3.Listener) *tlsInspector {
	for _, f := range l.GetListenerFilters() {
		if typeName(f.GetTypedConfig().GetTypeUrl()) != tlsInspectorType {
			continue
		}
		ti := &tlsInspector{maxHello: maxClientHello}
		if msg, err := unpackAny(f.GetTypedConfig()); err == nil {
			if cfg, ok := msg.(*tlsinspectorv3.TlsInspector); ok {
				if m := cfg.GetMaxClientHelloSize(); m != nil {
					ti.maxHello = int(m.GetValue())
				}
				ti.closeOnErr = cfg.GetCloseConnectionOnClientHelloParsingErrors()
			}
		}
		return ti
	}
	return nil
}

// listenerFiltersTimeout is listener_filters_timeout: 15 s when unset, and
// 0 turns it off.
func listenerFiltersTimeout(l *listenerv3.Listener) time.Duration {
	if l.GetListenerFiltersTimeout() == nil {
		return defaultListenerFiltersTimeout
	}
	return l.GetListenerFiltersTimeout().AsDuration()
}

// inspectResult is how a socket left the listener filters.
type inspectResult int

const (
	inspectDone        inspectResult = iota // go on to the filter chain
	inspectTimeout                          // listener_filters_timeout passed
	inspectRemoteClose                      // the peer closed first
	inspectReadError                        // reading the socket failed
	inspectClosed                           // the filter closed the socket
)

var errHelloTooLarge = errors.New("client hello too large")

// peekConn feeds a TLS server handshake from the socket, keeps every byte
// it read so the connection can replay them (Envoy only peeks), and never
// writes: the inspector sends nothing to the client.
type peekConn struct {
	net.Conn
	buf     bytes.Buffer
	max     int
	readErr error
}

func (p *peekConn) Read(b []byte) (int, error) {
	if p.buf.Len() >= p.max {
		return 0, errHelloTooLarge
	}
	if len(b) > p.max-p.buf.Len() {
		b = b[:p.max-p.buf.Len()]
	}
	n, err := p.Conn.Read(b)
	p.buf.Write(b[:n])
	if err != nil && p.readErr == nil {
		p.readErr = err
	}
	return n, err
}

func (p *peekConn) Write(b []byte) (int, error) { return len(b), nil }

var errStopHandshake = errors.New("tls inspector has the client hello")

// inspect runs tls_inspector on conn, as Filter::parseClientHello does with
// BoringSSL: a TLS ClientHello gives transport "tls", its SNI and ALPN;
// bytes that are not TLS give "raw_buffer" (tls_not_found). It returns
// the bytes read, to be replayed.
func (ti *tlsInspector) inspect(conn net.Conn, info *socketInfo, st *statStore, log *logger) (inspectResult, []byte) {
	pc := &peekConn{Conn: conn, max: ti.maxHello}
	var hello *tls.ClientHelloInfo
	srv := tls.Server(pc, &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		hello = chi
		return nil, errStopHandshake
	}})
	err := srv.Handshake()
	switch {
	case hello != nil:
		st.counter("tls_inspector.tls_found").inc()
		info.transport = "tls"
		// Envoy matches the requested server name in lower case.
		info.serverName = strings.ToLower(hello.ServerName)
		if hello.ServerName != "" {
			st.counter("tls_inspector.sni_found").inc()
			log.logf(lvlDebug, "filter", "source/extensions/filters/listener/tls_inspector/tls_inspector.cc:137", "tls:onServerName(), requestedServerName: %s", hello.ServerName)
		} else {
			st.counter("tls_inspector.sni_not_found").inc()
		}
		if len(hello.SupportedProtos) > 0 {
			st.counter("tls_inspector.alpn_found").inc()
			info.alpn = append([]string(nil), hello.SupportedProtos...)
		} else {
			st.counter("tls_inspector.alpn_not_found").inc()
		}
		return inspectDone, pc.buf.Bytes()
	case errors.Is(err, errHelloTooLarge) || errors.Is(pc.readErr, errHelloTooLarge):
		st.counter("tls_inspector.client_hello_too_large").inc()
		return inspectClosed, nil
	case errors.Is(pc.readErr, os.ErrDeadlineExceeded):
		return inspectTimeout, pc.buf.Bytes()
	case errors.Is(pc.readErr, io.EOF):
		return inspectRemoteClose, nil
	case pc.readErr != nil:
		return inspectReadError, nil
	case ti.closeOnErr:
		return inspectClosed, nil
	}
	st.counter("tls_inspector.tls_not_found").inc()
	return inspectDone, pc.buf.Bytes()
}

// replayConn returns the peeked bytes before reading on.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func withReplay(conn net.Conn, peeked []byte) net.Conn {
	if len(peeked) == 0 {
		return conn
	}
	return &replayConn{Conn: conn, r: io.MultiReader(bytes.NewReader(peeked), conn)}
}

// initTLSInspectorStats creates the filter's counters, which Envoy keeps in
// the root scope (tls_inspector.*) once a listener uses it.
func (s *server) initTLSInspectorStats() {
	for _, n := range []string{"tls_found", "tls_not_found", "sni_found", "sni_not_found", "alpn_found", "alpn_not_found", "client_hello_too_large"} {
		s.stats.counter("tls_inspector." + n)
	}
}
