// Package relay sits between Envoy and the control plane on the ADS
// stream: Envoy connects to a Unix socket in the work dir without a token;
// the relay opens one stream to the control plane per Envoy stream, over
// TLS, with the token read afresh, and forwards every message unchanged and
// in order. On the way it observes subscriptions, ACKs and NACKs, and the
// resources Envoy holds, keeps them in a last-known-good cache, and serves
// Envoy from that cache while the control plane is unreachable.
package relay

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/throttle"
)

// Relay serves ADS (and HDS) to Envoy on a Unix socket.
type Relay struct {
	opts   Options
	log    *zap.Logger
	roots  *x509.CertPool
	server *grpc.Server
	ln     net.Listener
	met    relayMetrics

	envoyState envoyState     // what Envoy holds, as far as its ACKs tell
	namedPorts namedPortWatch // MeshService SNIs with port names, last warned (namedports.go)

	closeOnce sync.Once

	upMu   sync.Mutex // serialises ADS opens: the old stream closes first
	active *upstream

	// cacheEvents orders a cache state change with its CachedConfig event;
	// mu is not held while the agent handles it.
	cacheEvents sync.Mutex

	mu              sync.Mutex
	lastObserver    chan struct{} // closed once the newest ADS session's observer is done
	cache           CacheState
	lastErr         *StreamError
	unreachableWarn throttle.Throttle // guarded by mu
	tooLargeWarn    throttle.Throttle // guarded by mu
	upstream        Upstream
	heldSince       time.Time // the current run of "already an active stream"
	cacheRefusal    string    // why the cache could not be served, as last said
	cacheFirst      bool      // Options.CacheFirst, until the first ADS session takes it
	subs            *subscriptions

	spare     spareConn // a connection a refused stream left, for the next attempt
	withdrawn withdrawal
	hand      handoverState
	// reregistered is the stream Reregister closed, until its session
	// takes it up (reregister.go).
	reregistered atomic.Pointer[upstream]
}

// New checks opts; Start listens.
func New(opts Options) (*Relay, error) {
	if opts.SocketPath == "" || opts.Upstream.Address == "" || opts.Token == nil {
		return nil, errors.New("relay: socket path, upstream address and token source are required")
	}
	// The system's roots only when no CA is given: reading them costs a
	// start milliseconds and megabytes.
	roots := x509.NewCertPool()
	if len(opts.Upstream.CAPEM) > 0 {
		if !roots.AppendCertsFromPEM(opts.Upstream.CAPEM) {
			return nil, errors.New("relay: no CA certificate in what the bootstrap's validation context or " + config.KeyCACertFile.Flag() + " gave")
		}
	} else {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("relay: no CA certificate for the control plane, and the system's roots cannot be read: %w", err)
		}
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 3 * time.Second
	}
	if opts.Backoff.Initial <= 0 {
		opts.Backoff.Initial = time.Second
	}
	if opts.Backoff.Max < opts.Backoff.Initial {
		opts.Backoff.Max = 5 * opts.Backoff.Initial
	}
	if opts.UnansweredAfter <= 0 {
		opts.UnansweredAfter = DefaultUnansweredAfter
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Relay{opts: opts, log: opts.Log, roots: roots, cacheFirst: opts.CacheFirst}
	r.envoyState.types = map[string]*typeState{}
	r.unreachableWarn.Every = time.Minute
	r.tooLargeWarn.Every = time.Minute
	return r, nil
}

// Start listens on the socket and serves until Close.
func (r *Relay) Start() error {
	ln := r.opts.Listener
	if ln == nil {
		var err error
		if ln, err = Listen(r.opts.SocketPath); err != nil {
			return err
		}
	}
	r.ln = ln
	r.server = grpc.NewServer(grpc.Creds(peerCreds{}), grpc.ForceServerCodecV2(rawCodec{}), grpc.MaxRecvMsgSize(64<<20),
		// Stop returns once every stream's handler has: what the relay knows
		// Envoy holds is final when Close returns.
		grpc.WaitForHandlers(true),
		// Fixed windows, as on the upstream side: no BDP pings on the
		// socket; Envoy's own requests are small.
		grpc.InitialWindowSize(16<<20), grpc.InitialConnWindowSize(16<<20),
		experimental.BufferPool(relayPool))
	r.server.RegisterService(&grpc.ServiceDesc{
		ServiceName: adsService,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "StreamAggregatedResources", Handler: r.handler(sotw{}), ServerStreams: true, ClientStreams: true},
			{StreamName: "DeltaAggregatedResources", Handler: r.handler(delta{}), ServerStreams: true, ClientStreams: true},
		},
	}, struct{}{})
	r.server.RegisterService(&grpc.ServiceDesc{
		ServiceName: hdsService,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "StreamHealthCheck", Handler: r.handler(hds{}), ServerStreams: true, ClientStreams: true},
		},
	}, struct{}{})
	go func() { _ = r.server.Serve(ln) }()
	return nil
}

func (r *Relay) handler(kind streamKind) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		return r.serve(kind, stream)
	}
}

// Close ends Envoy's streams and their upstream streams and removes the
// socket. It does not close the cache, which reads what Envoy holds when
// it writes, at the latest at its own Close.
func (r *Relay) Close() {
	if r.server == nil {
		return
	}
	r.closeOnce.Do(func() {
		r.server.Stop()  // waits for the handlers: the cache reads Envoy's state at its Close
		_ = r.ln.Close() // Serve may not have taken it yet; this unlinks the socket
		r.upMu.Lock()
		if r.active != nil {
			r.active.close()
		}
		r.upMu.Unlock()
		r.spare.drop()
		r.withdrawn.close()
	})
}

// State is the relay's view now.
func (r *Relay) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := State{Cache: r.cache, Upstream: r.upstream}
	if r.lastErr != nil {
		e := *r.lastErr
		st.LastError = &e
	}
	return st
}

// Listen opens the relay's socket at path, 0600, replacing a stale socket
// but nothing else; closing the listener removes it.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("xDS relay socket %s exists and is not a socket; remove it", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("xDS relay socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("xDS relay socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("xDS relay socket: %w", err)
	}
	return ln, nil
}

// takeCacheFirst is Options.CacheFirst, once.
func (r *Relay) takeCacheFirst() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.cacheFirst
	r.cacheFirst = false
	return first
}

// observeAfter chains the observers of ADS sessions: it records done as
// the newest session's and returns the one before it (nil for the first). A stream Envoy
// resets itself ends at once, while its observer may still hold its last
// ACKs; observed after the next stream's, they would put back what Envoy
// has dropped since.
func (r *Relay) observeAfter(done chan struct{}) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.lastObserver
	r.lastObserver = done
	return prev
}

// serve runs one Envoy stream to its end.
func (r *Relay) serve(kind streamKind, stream grpc.ServerStream) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s := &session{r: r, kind: kind, envoy: stream, obs: newObserver(r), reqs: make(chan envoyRequest),
		toObserver: make(chan observedMessage, 16), subs: newSubscriptions()}
	observed := make(chan struct{})
	s.observedDone, s.detach, s.pid, s.ctx = observed, make(chan struct{}), peerPID(stream.Context()), ctx
	// A handover's new Envoy (handover.go) stands by beside the serving one.
	fresh := kind.exclusive() && r.changesProtocol(kind, s)
	if !fresh && kind.exclusive() && r.isRetired(kind) {
		return parkRetired(stream)
	}
	standby := !fresh && kind.exclusive() && r.isStandby(s.pid)
	var prev <-chan struct{}
	if kind.exclusive() && !standby { // ADS: one stream at a time; HDS runs beside it
		prev = r.observeAfter(observed)
		r.mu.Lock()
		r.subs = s.subs // the newest Envoy stream's node, for a withdrawal
		r.mu.Unlock()
		r.hand.sawKind(kind)
	}
	go s.observeAll(prev, observed)
	defer func() { close(s.toObserver); <-observed }() // Envoy's state is complete when it returns
	go s.readEnvoy(ctx)
	if standby {
		return s.serveStandby(ctx)
	}
	return s.run(ctx)
}

// Unanswered are the types Envoy's newest stream subscribed to of which it
// holds nothing yet: kuma-cp 2.14 answers a zone ingress's listener
// subscription not at all while its zone has no MeshService, and Envoy
// waits in INITIALIZING for good.
func (r *Relay) Unanswered() []string {
	r.mu.Lock()
	subs := r.subs
	r.mu.Unlock()
	if subs == nil {
		return nil
	}
	types, _ := subs.typesAndNode()
	r.envoyState.mu.Lock()
	defer r.envoyState.mu.Unlock()
	var out []string
	for _, t := range types {
		if r.envoyState.types[t] == nil {
			out = append(out, t)
		}
	}
	return out
}
