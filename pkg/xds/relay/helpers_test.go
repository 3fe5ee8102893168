package relay

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

const (
	listenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	clusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	// waitLimit is a generous ceiling for what should take milliseconds.
	waitLimit = 20 * time.Second
)

// pki is a CA and a server certificate for 127.0.0.1 and localhost.
type pki struct {
	caPEM  []byte
	server tls.Certificate
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := testutil.NewPKI(t, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	return &pki{caPEM: p.CAPEM, server: p.Cert}
}

// cpStream is one stream the fake control plane accepted.
type cpStream struct {
	grpc.ServerStream
	method string
	token  string
	md     metadata.MD
}

func (s *cpStream) recv() ([]byte, error) {
	f := &frame{}
	err := s.RecvMsg(f)
	return f.b, err
}

func (s *cpStream) send(b []byte) error { return s.SendMsg(&frame{b: b}) }

// fakeCP is a scripted control plane over TLS: every stream runs script.
type fakeCP struct {
	t      testing.TB
	addr   string
	server *grpc.Server
	script func(s *cpStream) error

	mu     sync.Mutex
	events []string // "open <token>", "close <token>"
	opened chan *cpStream
}

func startFakeCP(t testing.TB, p *pki, addr string, script func(s *cpStream) error, opts ...grpc.ServerOption) *fakeCP {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cp := &fakeCP{t: t, addr: ln.Addr().String(), script: script, opened: make(chan *cpStream, 100)}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.server}})
	cp.server = grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(creds), grpc.ForceServerCodecV2(rawCodec{})}, opts...)...)
	handler := func(method string) grpc.StreamHandler {
		return func(_ any, ss grpc.ServerStream) error {
			md, _ := metadata.FromIncomingContext(ss.Context())
			s := &cpStream{ServerStream: ss, method: method, md: md, token: strings.Join(md.Get("authorization"), ",")}
			cp.record("open " + s.token)
			defer cp.record("close " + s.token)
			cp.opened <- s
			return cp.script(s)
		}
	}
	stream := func(method string) grpc.StreamDesc {
		return grpc.StreamDesc{StreamName: method, Handler: handler(method), ServerStreams: true, ClientStreams: true}
	}
	cp.server.RegisterService(&grpc.ServiceDesc{ServiceName: "envoy.service.discovery.v3.AggregatedDiscoveryService", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{stream("DeltaAggregatedResources"), stream("StreamAggregatedResources")}}, struct{}{})
	cp.server.RegisterService(&grpc.ServiceDesc{ServiceName: hdsService, HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{stream("StreamHealthCheck")}}, struct{}{})
	go func() { _ = cp.server.Serve(ln) }()
	t.Cleanup(cp.server.Stop)
	return cp
}

// answerAndHold sends one response (bytes), then reads until the stream
// ends; the script's end.
func (s *cpStream) answerAndHold(resp []byte) error {
	if err := s.send(resp); err != nil {
		return nil
	}
	for {
		if _, err := s.recv(); err != nil {
			return nil
		}
	}
}

// alreadyActiveStream is kuma-cp's refusal of a second stream of a node.
func alreadyActiveStream() error {
	return grpcstatus.Error(codes.Unknown, "there is already an active stream from this node, try again later")
}

func (cp *fakeCP) record(e string) {
	cp.mu.Lock()
	cp.events = append(cp.events, e)
	cp.mu.Unlock()
}

func (cp *fakeCP) log() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.events...)
}

func (cp *fakeCP) nextStream(t testing.TB) *cpStream {
	t.Helper()
	select {
	case s := <-cp.opened:
		return s
	case <-time.After(waitLimit):
		t.Fatal("the control plane got no stream")
		return nil
	}
}

// events collects the relay's callbacks.
type events struct {
	mu       sync.Mutex
	errs     []StreamError
	rejects  []Rejection
	accepts  []Acceptance
	cache    []CacheState
	changed  chan struct{}
	disabled bool
}

func newEvents() *events { return &events{changed: make(chan struct{}, 1000)} }

func (e *events) hooks() Events {
	note := func(f func()) {
		e.mu.Lock()
		f()
		e.mu.Unlock()
		e.changed <- struct{}{}
	}
	return Events{
		StreamError:  func(se StreamError) { note(func() { e.errs = append(e.errs, se) }) },
		Rejected:     func(r Rejection) { note(func() { e.rejects = append(e.rejects, r) }) },
		Accepted:     func(a Acceptance) { note(func() { e.accepts = append(e.accepts, a) }) },
		CachedConfig: func(c CacheState) { note(func() { e.cache = append(e.cache, c) }) },
	}
}

// await waits until cond holds on the collected events.
func (e *events) await(t testing.TB, what string, cond func(e *events) bool) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		e.mu.Lock()
		ok := cond(e)
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.changed:
		case <-deadline:
			e.mu.Lock()
			defer e.mu.Unlock()
			t.Fatalf("timed out waiting for %s; errors %v, rejections %v, accepts %d, cache %v", what, e.errs, e.rejects, len(e.accepts), e.cache)
		}
	}
}

type relayOpts func(*Options)

// startRelay runs a relay to cp's address on a socket in a fresh dir.
func startRelay(t testing.TB, p *pki, cpAddr string, token func() (string, error), ev *events, mods ...relayOpts) *Relay {
	t.Helper()
	dir, err := os.MkdirTemp("", "xr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var caPEM []byte
	if p != nil {
		caPEM = p.caPEM
	}
	opts := Options{
		SocketPath: filepath.Join(dir, "xds.sock"),
		Upstream:   cpdial.Target{Address: cpAddr, ServerName: "127.0.0.1", CAPEM: caPEM, Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}},
		Token:      token,
		Backoff:    backoff.Backoff{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond},
		Log:        zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
	}
	if ev != nil {
		opts.Events = ev.hooks()
	}
	for _, m := range mods {
		m(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func staticToken(tok string) func() (string, error) {
	return func() (string, error) { return tok, nil }
}

// envoyClient plays Envoy on the relay's socket.
type envoyClient struct {
	t      testing.TB
	conn   *grpc.ClientConn
	stream grpc.ClientStream
	cancel context.CancelFunc
}

func dialEnvoy(t testing.TB, r *Relay, method string) *envoyClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+r.opts.SocketPath,
		append(envoyDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	c := &envoyClient{t: t, conn: conn, stream: stream, cancel: cancel}
	t.Cleanup(c.close)
	return c
}

// envoyWindow is what Envoy advertises on its gRPC clusters unless told
// otherwise: Http2ProtocolOptions' initial_stream_window_size and
// initial_connection_window_size default to 256 MiB
// (source/common/http/http_option_limits.h), and the ADS cluster of a
// Kuma bootstrap leaves them at that.
const envoyWindow = 256 << 20

// envoyDialOptions make a grpc-go client behave like Envoy's gRPC client
// towards whoever serves it: fixed 256 MiB windows, no BDP probing.
func envoyDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(envoyWindow), grpc.WithInitialConnWindowSize(envoyWindow),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20)),
	}
}

func (c *envoyClient) close() {
	c.cancel()
	_ = c.conn.Close()
}

func (c *envoyClient) sendRaw(b []byte) {
	c.t.Helper()
	if err := c.stream.SendMsg(&frame{b: b}); err != nil {
		c.t.Fatalf("Envoy send: %v", err)
	}
}

func (c *envoyClient) send(m proto.Message) []byte {
	c.t.Helper()
	b := mustMarshal(c.t, m)
	c.sendRaw(b)
	return b
}

// recv gives up (failing the stream) after waitLimit.
func (c *envoyClient) recv() ([]byte, error) {
	stuck := time.AfterFunc(waitLimit, c.cancel)
	defer stuck.Stop()
	f := &frame{}
	err := c.stream.RecvMsg(f)
	return f.b, err
}

func (c *envoyClient) recvDelta() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	return recvInto(c, &discoveryv3.DeltaDiscoveryResponse{})
}

func (c *envoyClient) recvSotw() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	return recvInto(c, &discoveryv3.DiscoveryResponse{})
}

// recvInto reads Envoy's next response into resp.
func recvInto[M proto.Message](c *envoyClient, resp M) M {
	c.t.Helper()
	b, err := c.recv()
	if err != nil {
		c.t.Fatalf("Envoy recv: %v", err)
	}
	if err := proto.Unmarshal(b, resp); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var node = &corev3.Node{Id: "default.zp-1", Cluster: "zp"}

func listener(t testing.TB, name string, pad int) *anypb.Any {
	t.Helper()
	a, err := anypb.New(&listenerv3.Listener{Name: name, StatPrefix: strings.Repeat("x", pad)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func deltaResponse(t testing.TB, typ, version, nonce string, names ...string) *discoveryv3.DeltaDiscoveryResponse {
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: typ, SystemVersionInfo: version, Nonce: nonce}
	for _, n := range names {
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: n, Version: version, Resource: listener(t, n, 0)})
	}
	return resp
}

func decodeDeltaRequest(t testing.TB, b []byte) *discoveryv3.DeltaDiscoveryRequest {
	t.Helper()
	req := &discoveryv3.DeltaDiscoveryRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func openCache(t testing.TB, dir string) *lkgcache.Cache {
	t.Helper()
	c, err := lkgcache.Open(lkgcache.Options{Dir: dir, Identity: lkgcache.Identity{Mesh: "default", Name: "zp-1", Role: "ingress", ControlPlane: "cp"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
