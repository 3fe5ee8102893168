package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// httpRuntime serves an HTTP connection manager: route matching,
// direct_response, and routes to a cluster proxied to its first endpoint.
type httpRuntime struct {
	s       *server
	hcm     *hcmv3.HttpConnectionManager
	loggers []*accessLogger
}

const defaultRouteTimeout = 15 * time.Second

// checkHTTPRuntime holds the construction errors of an inline route
// configuration: direct response bodies over the limit and, unless
// validate_clusters is false, routes to clusters that do not exist.
func (s *server) checkHTTPRuntime(h *httpRuntime) error {
	rc := h.hcm.GetRouteConfig()
	if rc == nil {
		return nil
	}
	max := uint32(defaultMaxDirectResponseBody)
	if m := rc.GetMaxDirectResponseBodySizeBytes(); m != nil {
		max = m.GetValue()
	}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if dr := r.GetDirectResponse(); dr != nil && dr.GetBody() != nil {
				body, err := dataSourceText(dr.GetBody())
				if err != nil {
					return err
				}
				if uint32(len(body)) > max {
					return fmt.Errorf("response body size is %d bytes; maximum is %d", len(body), max)
				}
			}
		}
	}
	if rc.GetValidateClusters() != nil && !rc.GetValidateClusters().GetValue() {
		return nil
	}
	for _, c := range routeClusters(rc) {
		if s.findCluster(c) == nil {
			return fmt.Errorf("route: unknown cluster '%s'", c)
		}
	}
	return nil
}

// findCluster looks a cluster up among the static and dynamic ones; the
// caller may or may not hold s.mu, so dynamic lookups copy under it.
func (s *server) findCluster(name string) *clusterv3.Cluster {
	for _, c := range s.staticClusters {
		if c.GetName() == name {
			return c
		}
	}
	if r, ok := s.res[typeCluster][name]; ok {
		return r.msg.(*clusterv3.Cluster)
	}
	return nil
}

func (s *server) lockedCluster(name string) (*clusterv3.Cluster, *endpointv3.ClusterLoadAssignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findCluster(name)
	if c == nil || c.GetType() != clusterv3.Cluster_EDS {
		return c, nil
	}
	svc := c.GetEdsClusterConfig().GetServiceName()
	if svc == "" {
		svc = name
	}
	if r, ok := s.res[typeEndpoint][svc]; ok {
		return c, r.msg.(*endpointv3.ClusterLoadAssignment)
	}
	return c, nil
}

func (h *httpRuntime) routeConfig() *routev3.RouteConfiguration {
	if rc := h.hcm.GetRouteConfig(); rc != nil {
		return rc
	}
	if rds := h.hcm.GetRds(); rds != nil {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		if r, ok := h.s.res[typeRoute][rds.GetRouteConfigName()]; ok {
			return r.msg.(*routev3.RouteConfiguration)
		}
	}
	return nil
}

func (h *httpRuntime) statPrefix() string { return "http." + h.hcm.GetStatPrefix() + "." }

// oneConnListener hands one connection to an http.Server and ends Serve
// once that connection is closed.
type oneConnListener struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
	sent bool
	mu   sync.Mutex
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.sent {
		l.sent = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) finish()        { l.once.Do(func() { close(l.done) }) }
func (l *oneConnListener) Close() error   { l.finish(); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// serveConn serves HTTP/1.1 and, unless the codec says otherwise, HTTP/2
// with prior knowledge (h2c) on one downstream connection.
func (h *httpRuntime) serveConn(c net.Conn, connID uint64) {
	st := h.s.stats
	p := h.statPrefix()
	st.counter(p + "downstream_cx_total").inc()
	st.gauge(p + "downstream_cx_active").inc()
	defer st.gauge(p + "downstream_cx_active").dec()
	ln := &oneConnListener{c: c, done: make(chan struct{})}
	protos := new(http.Protocols)
	switch h.hcm.GetCodecType() {
	case hcmv3.HttpConnectionManager_HTTP1:
		protos.SetHTTP1(true)
	case hcmv3.HttpConnectionManager_HTTP2:
		protos.SetUnencryptedHTTP2(true)
	default:
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           &httpHandler{h: h, connID: connID},
		Protocols:         protos,
		ReadHeaderTimeout: 60 * time.Second,
		ErrorLog:          nullLogger,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				ln.finish()
			}
		},
	}
	srv.Serve(ln)
}

type httpHandler struct {
	h      *httpRuntime
	connID uint64
}

// recorder captures what the access log needs of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// countingBody counts request body bytes for BYTES_RECEIVED.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

func (hh *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hh.h
	start := time.Now()
	st := h.s.stats
	st.counter(h.statPrefix() + "downstream_rq_total").inc()
	rec := &recorder{ResponseWriter: w}
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	out := h.handle(rec, r)
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	st.counter(fmt.Sprintf("%sdownstream_rq_%dxx", h.statPrefix(), rec.status/100)).inc()
	st.counter(h.statPrefix() + "downstream_rq_completed").inc()
	if len(h.loggers) == 0 {
		return
	}
	proto := "HTTP/1.1"
	if r.ProtoMajor == 2 {
		proto = "HTTP/2"
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	view := viewOf(r)
	lc := &logContext{
		start: start, end: time.Now(), bytesIn: body.n, bytesOut: rec.bytes, connID: hh.connID,
		local: local, remote: remoteAddr(r), logType: "DownstreamEnd", cluster: out.cluster,
		upstream: out.upstream, flags: out.flags, routeName: out.routeName, protocol: proto, status: rec.status,
		reqHeader: view.header,
		respHeader: func(n string) (string, bool) {
			v := rec.Header().Values(n)
			return strings.Join(v, ","), len(v) > 0
		},
	}
	for _, l := range h.loggers {
		l.log(lc)
	}
}

func remoteAddr(r *http.Request) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return nil
	}
	return a
}

// outcome is what the access log learns from handling a request.
type outcome struct {
	cluster, upstream, flags, routeName string
}

func (h *httpRuntime) handle(w http.ResponseWriter, r *http.Request) outcome {
	w.Header().Set("Server", "envoy")
	rc := h.routeConfig()
	if rc == nil {
		localReply(w, http.StatusNotFound, "")
		return outcome{flags: "NR"}
	}
	view := viewOf(r)
	vh := selectVirtualHost(rc, r.Host)
	var route *routev3.Route
	if vh != nil {
		route = matchRoute(vh, view)
	}
	if route == nil {
		localReply(w, http.StatusNotFound, "")
		return outcome{flags: "NR"}
	}
	out := outcome{routeName: route.GetName()}
	switch a := route.GetAction().(type) {
	case *routev3.Route_DirectResponse:
		body, _ := dataSourceText(a.DirectResponse.GetBody())
		applyResponseHeaders(w.Header(), rc, vh, route)
		localReply(w, int(a.DirectResponse.GetStatus()), body)
		return out
	case *routev3.Route_Route:
		return h.proxy(w, r, rc, vh, route, a.Route, out)
	}
	// Redirects and filter actions are not modelled.
	localReply(w, http.StatusNotImplemented, "route action not supported by the Envoy stand-in\n")
	return out
}

// localReply is Envoy's sendLocalReply: a non-empty body is text/plain.
func localReply(w http.ResponseWriter, code int, body string) {
	if body != "" {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(code)
	if body != "" {
		io.WriteString(w, body)
	}
}

func (h *httpRuntime) proxy(w http.ResponseWriter, r *http.Request, rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, route *routev3.Route, a *routev3.RouteAction, out outcome) outcome {
	name := a.GetCluster()
	if name == "" && len(a.GetWeightedClusters().GetClusters()) > 0 {
		name = a.GetWeightedClusters().GetClusters()[0].GetName()
	}
	out.cluster = name
	c, cla := h.s.lockedCluster(name)
	if c == nil {
		localReply(w, http.StatusServiceUnavailable, "")
		out.flags = "NC"
		return out
	}
	if cla == nil {
		cla = c.GetLoadAssignment()
	}
	addr := firstEndpoint(cla)
	if addr == nil {
		localReply(w, http.StatusServiceUnavailable, "no healthy upstream")
		out.flags = "UH"
		return out
	}
	network, target := "tcp", ""
	if p := addr.GetPipe(); p != nil {
		network, target = "unix", p.GetPath()
	} else {
		sa := addr.GetSocketAddress()
		target = net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	}
	out.upstream = target
	tlsCfg, err := h.upstreamTLS(c)
	if err != nil {
		localReply(w, http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: "+err.Error())
		out.flags = "UF"
		return out
	}
	connectTimeout := 5 * time.Second
	if ct := c.GetConnectTimeout(); ct != nil {
		connectTimeout = ct.AsDuration()
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: connectTimeout}
			conn, err := d.DialContext(ctx, network, target)
			if err != nil || tlsCfg == nil {
				return conn, err
			}
			tc, _, err := tlsCfg.ClientHandshake(ctx, "", conn)
			return tc, err
		},
	}
	if upstreamHTTP2(c) {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	timeout := defaultRouteTimeout
	if a.GetTimeout() != nil {
		timeout = a.GetTimeout().AsDuration()
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	started := time.Now()
	var failed string
	rp := &httputil.ReverseProxy{
		Transport: tr,
		ErrorLog:  nullLogger,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "envoy-upstream"
			pr.Out.Host = r.Host
			if hr := a.GetHostRewriteLiteral(); hr != "" {
				pr.Out.Host = hr
			}
			rewritePath(pr.Out, route.GetMatch(), a)
			pr.Out.Header.Set("X-Forwarded-Proto", "http")
			if pr.Out.Header.Get("X-Request-Id") == "" {
				pr.Out.Header.Set("X-Request-Id", newRequestID())
			}
			if timeout > 0 {
				pr.Out.Header.Set("X-Envoy-Expected-Rq-Timeout-Ms", strconv.FormatInt(timeout.Milliseconds(), 10))
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("Server", "envoy")
			resp.Header.Set("X-Envoy-Upstream-Service-Time", strconv.FormatInt(time.Since(started).Milliseconds(), 10))
			applyResponseHeaders(resp.Header, rc, vh, route)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				failed = "UT"
				localReply(w, http.StatusGatewayTimeout, "upstream request timeout")
				return
			}
			failed = "UF"
			localReply(w, http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: "+strerror(err))
		},
	}
	rp.ServeHTTP(w, r.WithContext(ctx))
	out.flags = failed
	return out
}

// rewritePath applies prefix_rewrite or regex_rewrite to the path.
func rewritePath(req *http.Request, m *routev3.RouteMatch, a *routev3.RouteAction) {
	full := req.URL.RequestURI()
	var rewritten string
	switch {
	case a.GetPrefixRewrite() != "" && m.GetPrefix() != "":
		rewritten = a.GetPrefixRewrite() + full[len(m.GetPrefix()):]
	case a.GetPrefixRewrite() != "" && m.GetPath() != "":
		rewritten = a.GetPrefixRewrite() + full[len(pathWithoutQuery(full)):]
	case a.GetRegexRewrite() != nil:
		re, err := regexp.Compile(a.GetRegexRewrite().GetPattern().GetRegex())
		if err != nil {
			return
		}
		p := pathWithoutQuery(full)
		rewritten = re.ReplaceAllString(p, envoySubstitution(a.GetRegexRewrite().GetSubstitution())) + full[len(p):]
	default:
		return
	}
	u, err := req.URL.Parse(rewritten)
	if err != nil {
		return
	}
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
}

// envoySubstitution turns RE2 "\1" references into Go's "${1}".
func envoySubstitution(s string) string {
	return regexp.MustCompile(`\\([0-9])`).ReplaceAllString(s, `$${$1}`)
}

func firstEndpoint(cla *endpointv3.ClusterLoadAssignment) *corev3.Address {
	for _, ep := range cla.GetEndpoints() {
		for _, lb := range ep.GetLbEndpoints() {
			if a := lb.GetEndpoint().GetAddress(); a != nil {
				return a
			}
		}
	}
	return nil
}

// upstreamHTTP2 tells whether a cluster speaks HTTP/2 to its endpoints.
func upstreamHTTP2(c *clusterv3.Cluster) bool {
	if c.GetHttp2ProtocolOptions() != nil {
		return true
	}
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	msg, err := unpackAny(a)
	if err != nil || msg == nil {
		return false
	}
	o, ok := msg.(*httpv3.HttpProtocolOptions)
	return ok && o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

func (h *httpRuntime) upstreamTLS(c *clusterv3.Cluster) (*envoyTLS, error) {
	ts := c.GetTransportSocket()
	if ts == nil {
		return nil, nil
	}
	msg, err := unpackAny(ts.GetTypedConfig())
	if err != nil {
		return nil, err
	}
	utc, ok := msg.(*tlsv3.UpstreamTlsContext)
	if !ok {
		return nil, nil
	}
	cfg, err := upstreamTLSConfig(utc, h.s.lookupSecret)
	if err != nil {
		return nil, err
	}
	return &envoyTLS{cfg: cfg}, nil
}

func newRequestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// nullLogger drops net/http's own error lines; Envoy logs none of them.
var nullLogger = log.New(io.Discard, "", 0)
