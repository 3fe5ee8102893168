package main

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filealv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// chainRuntime is what the stand-in does with a connection on one filter
// chain: a tcp_proxy writes its access logs (no bytes are proxied), an HCM
// is served as HTTP, anything else is held open.
type chainRuntime struct {
	tcp  *tcpRuntime
	http *httpRuntime
}

type tcpRuntime struct {
	cluster          string
	loggers          []*accessLogger
	flushOnConnected bool
}

type accessLogger struct {
	file *logFile
	fmt  logFormatter
}

func (a *accessLogger) log(c *logContext) { a.file.write(a.fmt.format(c)) }

// listenerRuntime holds the built filter chains of one listener.
type listenerRuntime struct {
	chains map[*listenerv3.FilterChain]*chainRuntime
	first  *listenerv3.FilterChain
}

// connIDs numbers connections across the process, as Envoy's ConnectionId.
var connIDs atomic.Uint64

// buildListenerRuntime builds the filter chains like ListenerImpl does
// before the socket is bound: access-log formats are parsed and their files
// opened (blocking on a FIFO without a reader), so a bad format or an
// unopenable path rejects the listener.
func (s *server) buildListenerRuntime(l *listenerv3.Listener) (*listenerRuntime, error) {
	rt := &listenerRuntime{chains: map[*listenerv3.FilterChain]*chainRuntime{}}
	all := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		all = append(all, l.GetDefaultFilterChain())
	}
	for _, fc := range all {
		if rt.first == nil {
			rt.first = fc
		}
		cr := &chainRuntime{}
		for _, f := range fc.GetFilters() {
			msg, err := unpackAny(f.GetTypedConfig())
			if err != nil || msg == nil {
				continue
			}
			switch m := msg.(type) {
			case *tcpproxyv3.TcpProxy:
				loggers, err := s.buildAccessLoggers(m.GetAccessLog())
				if err != nil {
					return nil, err
				}
				cr.tcp = &tcpRuntime{
					cluster:          m.GetCluster(),
					loggers:          loggers,
					flushOnConnected: m.GetAccessLogOptions().GetFlushAccessLogOnConnected(),
				}
			case *hcmv3.HttpConnectionManager:
				loggers, err := s.buildAccessLoggers(m.GetAccessLog())
				if err != nil {
					return nil, err
				}
				cr.http = &httpRuntime{s: s, hcm: m, loggers: loggers}
				if err := s.checkHTTPRuntime(cr.http); err != nil {
					return nil, err
				}
			}
		}
		rt.chains[fc] = cr
	}
	return rt, nil
}

// buildAccessLoggers builds the envoy.access_loggers.file entries; other
// access loggers (gRPC, OpenTelemetry, stdout) are accepted and write
// nothing. Access-log filters are not evaluated: every entry is written.
func (s *server) buildAccessLoggers(logs []*accesslogv3.AccessLog) ([]*accessLogger, error) {
	var out []*accessLogger
	for _, al := range logs {
		msg, err := unpackAny(al.GetTypedConfig())
		if err != nil {
			return nil, err
		}
		cfg, ok := msg.(*filealv3.FileAccessLog)
		if !ok {
			continue
		}
		f, err := fileLogFormatter(cfg)
		if err != nil {
			return nil, err
		}
		file, err := s.accessLogs.open(cfg.GetPath())
		if err != nil {
			return nil, err
		}
		out = append(out, &accessLogger{file: file, fmt: f})
	}
	return out, nil
}

func fileLogFormatter(cfg *filealv3.FileAccessLog) (logFormatter, error) {
	switch f := cfg.GetAccessLogFormat().(type) {
	case *filealv3.FileAccessLog_Format:
		if f.Format == "" {
			return newFormatter(nil)
		}
		ps, err := parseFormat(f.Format)
		return &textFormatter{providers: ps}, err
	case *filealv3.FileAccessLog_JsonFormat:
		return newFormatter(&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: f.JsonFormat}})
	case *filealv3.FileAccessLog_TypedJsonFormat:
		return newFormatter(&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: f.TypedJsonFormat}})
	case *filealv3.FileAccessLog_LogFormat:
		return newFormatter(f.LogFormat)
	}
	return newFormatter(nil)
}

// chainFor is the runtime of fc, or of the listener's first chain when the
// caller could not tell which chain a connection matched.
func (rt *listenerRuntime) chainFor(fc *listenerv3.FilterChain) *chainRuntime {
	if rt == nil {
		return nil
	}
	if cr, ok := rt.chains[fc]; ok {
		return cr
	}
	return rt.chains[rt.first]
}

// countingConn counts the bytes read from and written to the peer.
type countingConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// serveConn runs a connection that matched fc until the peer closes it or
// the listener closes it: HTTP for an HCM, otherwise read and discard,
// writing tcp_proxy access-log entries on connect and close.
func (rt *listenerRuntime) serveConn(c net.Conn, fc *listenerv3.FilterChain) {
	cr := rt.chainFor(fc)
	cc := &countingConn{Conn: c}
	start := time.Now()
	id := connIDs.Add(1)
	if cr != nil && cr.http != nil {
		cr.http.serveConn(cc, id)
		return
	}
	var tcp *tcpRuntime
	if cr != nil {
		tcp = cr.tcp
	}
	entry := func(typ string) *logContext {
		lc := &logContext{start: start, bytesIn: cc.in.Load(), bytesOut: cc.out.Load(), connID: id,
			local: c.LocalAddr(), remote: c.RemoteAddr(), logType: typ, cluster: tcp.cluster}
		if typ == "TcpConnectionEnd" {
			lc.end = time.Now()
		}
		return lc
	}
	// The stand-in never dials the upstream; it counts as connected at once.
	if tcp != nil && tcp.flushOnConnected {
		for _, l := range tcp.loggers {
			l.log(entry("TcpUpstreamConnected"))
		}
	}
	io.Copy(io.Discard, cc)
	if tcp != nil {
		for _, l := range tcp.loggers {
			l.log(entry("TcpConnectionEnd"))
		}
	}
}
