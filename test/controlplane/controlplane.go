package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// Options configures Start.
type Options struct {
	Dir          string    // required; ca.pem (CA cert), server.pem, server-key.pem written here
	Addr         string    // DP server (TLS) listen address; default "127.0.0.1:0"
	AdminAddr    string    // plain-HTTP admin API; default "127.0.0.1:0"
	Meshes       []string  // meshes that exist at start
	AuthDisabled bool      // like KUMA_DP_SERVER_AUTHN_DP_PROXY_TYPE=none
	Log          io.Writer // log lines (plain text, one per event); nil = discard
	// ReloadableTokens is KUMA_DP_SERVER_AUTHN_ENABLE_RELOADABLE_TOKENS=true:
	// a request with dataplaneTokenPath gets a bootstrap whose ADS/HDS use
	// google_grpc reading that file, not the token baked in.
	ReloadableTokens bool
	// RSAServerKey gives the DP server an RSA 2048 key, as kuma-cp's
	// self-signed default certificate has (pkg/tls/cert.go), instead of
	// ECDSA P-256: its signature makes every TLS handshake about 1.4 ms
	// longer on the 2-core bench machine.
	RSAServerKey bool

	// DeregistrationDelay is kuma-cp's xdsServer.dataplaneDeregistrationDelay
	// (KUMA_XDS_DATAPLANE_DEREGISTRATION_DELAY): after the stream holding a
	// node closes, the node stays active (new streams from it are refused)
	// this long, then its Dataplane is deleted and the node released.
	// Zero is kuma-cp's default, 10 s; negative is no delay (kuma-cp's
	// "0s": deleted and released as the stream closes).
	DeregistrationDelay time.Duration
	// CacheExpiration is kuma-cp's store.cache.expirationTime
	// (KUMA_STORE_CACHE_EXPIRATION_TIME), which DataplaneLifecycle.register
	// sleeps after the upsert, before the proxy counts as connected: the
	// first response on an accepted stream comes no sooner. Zero is
	// kuma-cp's default, 1 s; negative is none.
	CacheExpiration time.Duration
	// EgressPropagation is how long a change of the Dataplane store takes
	// to reach the zone's sidecars (ZoneEgresses): kuma-cp's
	// store.cache.expirationTime twice (the read-only manager's LIST cache,
	// then the mesh context cache) plus
	// xdsServer.dataplaneConfigurationRefreshInterval (the sidecar
	// watchdog's tick), at most. Zero is kuma-cp's defaults' 1+1+1 = 3 s;
	// negative is none.
	EgressPropagation time.Duration

	// Services is how many MeshServices a zone ingress's xDS carries, as
	// kuma-cp would send an ingress of a zone with that many: per service
	// an EDS cluster, its ClusterLoadAssignment (EndpointsPerService
	// endpoints) and, on every ZoneIngress listener, a filter chain
	// matching its SNI (ServiceSNI). The first is "backend" (what
	// DestinationSNI names); the rest are ServiceName(1) and on. Zero or
	// one is the default: "backend" alone. Egress listeners are unchanged.
	Services int

	// Kuma is the kuma-cp release modelled: Kuma30 ("3.0", the default
	// when empty) or Kuma214 ("2.14", kuma-cp 2.14.3: SotW bootstrap and
	// ADS, its version rule against 2.14.3; see doc.go).
	Kuma string
	// SotWNeverAnswered: in 3.0 mode a SotW stream is accepted and never
	// answered, as kuma-cp master 348b6528 does (it registers SotW and
	// wires no callbacks), instead of refused with Unimplemented.
	SotWNeverAnswered bool

	// PadClusterBytes, when positive, adds to every proxy's clusters one
	// whose metadata carries that many bytes: a control plane sending
	// responses far larger than any mesh needs (padding.go).
	PadClusterBytes int
}

// ProxyInfo is what the CP knows about one node id's ADS connection.
type ProxyInfo struct {
	NodeID      string    `json:"nodeId"`
	Connected   bool      `json:"connected"`
	ConnectedAt time.Time `json:"connectedAt"`
	ACKed       []string  `json:"acked"` // type URLs ACKed at least once on the current/last connection
	// Listeners are the listener names Envoy holds as the current/last
	// connection knows: sent on it, or declared held when it opened (a
	// resumed stream is sent only what changed).
	Listeners []string `json:"listeners"`
	// Version is the node metadata's version.kumaDp.gitTag when the
	// current/last stream registered, as kuma-cp's DataplaneInsight
	// subscription keeps the agent's build (zoneproxy: "zoneproxy-<version>").
	Version string `json:"version"`
	// Protocol is the ADS protocol of the current/last stream:
	// ProtocolDelta or ProtocolSotW (2.14 mode only).
	Protocol string `json:"protocol"`
	// KumaDpVersion is the node metadata's version.kumaDp.version and
	// KumaCpCompatible kuma-cp's verdict on it against its own release
	// (KumaVersion), as its DataplaneInsight subscription records them:
	// false for another major or more than two minors away.
	KumaDpVersion    string `json:"kumaDpVersion"`
	KumaCpCompatible bool   `json:"kumaCpCompatible"`
}

// BootstrapRecord is one /bootstrap request as received, with the status
// the CP answered.
type BootstrapRecord struct {
	At     time.Time   `json:"at"`
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// Server is a running test control plane.
type Server struct {
	opts   Options
	kuma   atomic.Pointer[string] // the release modelled now (Upgrade)
	log    *logger
	certs  *certs
	tokens *tokenIssuer
	addr   string // DP server host:port, fixed after the first listen

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	meshes  map[string]bool
	faults  Faults
	records []BootstrapRecord // the newest maxRecords
	dropped int               // older records no longer kept
	proxies map[string]*proxyState
	streams map[int64]*adsStream
	active  map[string]int64 // node id -> stream id holding it
	nodes   map[string]*nodeState
	store   dpStore
	// epochDone is closed by each restart (and replaced): in-memory
	// lifecycle state of the CP process before it is gone.
	epochDone chan struct{}
	down      bool // restarting: streams are not opened
	timings   Timings
	hang      hangGate

	obs observabilityState // policies attached to proxies, zone listeners withheld

	migration migrationState // legacy zone proxies, MeshIdentity, MZAs (migration.go)

	// runtime is added to the bootstrap's static runtime layer "kuma".
	runtime map[string]float64

	dp dpServerState

	grpcServer *grpc.Server
	xdsCache   cachev3.SnapshotCache
	xdsServer  serverv3.Server
	mux        *http.ServeMux

	adminServer   *http.Server
	adminListener net.Listener
}

type proxyState struct {
	info      ProxyInfo
	acked     map[string]bool
	listeners map[string]bool
}

// Start generates (or reuses) the TLS material in opts.Dir and starts the
// DP server and the admin API.
func Start(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("controlplane: Options.Dir is required")
	}
	if opts.Services < 0 {
		return nil, errors.New("controlplane: Options.Services cannot be negative")
	}
	kuma, err := resolveKuma(opts.Kuma)
	if err != nil {
		return nil, err
	}
	opts.Kuma = kuma
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.AdminAddr == "" {
		opts.AdminAddr = "127.0.0.1:0"
	}
	c, err := loadOrCreateCerts(opts.Dir, opts.RSAServerKey)
	if err != nil {
		return nil, fmt.Errorf("controlplane: certificates: %w", err)
	}
	tokens, err := newTokenIssuer()
	if err != nil {
		return nil, fmt.Errorf("controlplane: signing key: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:    opts,
		log:     newLogger(opts.Log),
		certs:   c,
		tokens:  tokens,
		addr:    opts.Addr,
		ctx:     ctx,
		cancel:  cancel,
		meshes:  map[string]bool{},
		proxies: map[string]*proxyState{},
		streams: map[int64]*adsStream{},
		active:  map[string]int64{},
		nodes:   map[string]*nodeState{},
		store:   newDPStore(),

		epochDone: make(chan struct{}),
		timings:   resolveTimings(opts),
	}
	s.kuma.Store(&kuma)
	for _, m := range opts.Meshes {
		s.meshes[m] = true
	}
	s.setupXDS()
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/bootstrap", s.handleBootstrap)

	s.dp.mu.Lock()
	err = s.listenLocked()
	s.dp.mu.Unlock()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("controlplane: listen %s: %w", opts.Addr, err)
	}
	if err := s.startAdmin(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("controlplane: admin listen %s: %w", opts.AdminAddr, err)
	}
	s.log.printf("testcp started kuma=%s dp=%s admin=%s ca=%s auth=%s reloadableTokens=%t meshes=%v deregistrationDelay=%s cacheExpiration=%s egressPropagation=%s%s",
		s.KumaVersion(), s.URL(), s.AdminURL(), s.CACertFile(), authMode(opts.AuthDisabled), opts.ReloadableTokens, s.meshNames(),
		s.timings.DeregistrationDelay, s.timings.CacheExpiration, s.timings.EgressPropagation, servicesNote(opts.Services))
	return s, nil
}

func authMode(disabled bool) string {
	if disabled {
		return "none"
	}
	return "dpToken"
}

// Addr is the DP server's "127.0.0.1:<port>".
func (s *Server) Addr() string {
	s.dp.mu.Lock()
	defer s.dp.mu.Unlock()
	return s.addr
}

// URL is the DP server's https URL.
func (s *Server) URL() string { return "https://" + s.Addr() }

// AdminURL is the plain-HTTP admin API's URL.
func (s *Server) AdminURL() string { return "http://" + s.adminListener.Addr().String() }

// CACertFile is the CA that signed the DP server certificate.
func (s *Server) CACertFile() string { return filepath.Join(s.opts.Dir, caCertFileName) }

// port is the DP server's port.
func (s *Server) port() uint32 {
	_, p, _ := net.SplitHostPort(s.Addr())
	n, _ := strconv.ParseUint(p, 10, 16)
	return uint32(n)
}

// CreateMesh makes a mesh exist.
func (s *Server) CreateMesh(name string) { s.createMesh(name) }

func (s *Server) createMesh(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	existed := s.meshes[name]
	s.meshes[name] = true
	if !existed {
		s.log.printf("mesh %q created", name)
	}
	return !existed
}

// DeleteMesh removes a mesh and the Dataplanes in it (kuma-cp with
// store.unsafeDelete; by default kuma-cp refuses while Dataplanes exist).
func (s *Server) DeleteMesh(name string) { s.deleteMesh(name) }

func (s *Server) deleteMesh(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	existed := s.meshes[name]
	delete(s.meshes, name)
	if existed {
		n := s.deleteMeshDataplanesLocked(name)
		s.log.printf("mesh %q deleted with %d Dataplanes", name, n)
	}
	return existed
}

func (s *Server) meshExists(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meshes[name]
}

func (s *Server) meshNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.meshes))
	for m := range s.meshes {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

// IssueToken signs a dataplane token with the key the CP trusts for every
// mesh; the mesh does not need to exist.
func (s *Server) IssueToken(r TokenRequest) (string, error) {
	tok, err := s.tokens.issue(r, time.Now())
	if err != nil {
		return "", err
	}
	s.log.printf("token issued mesh=%q name=%q workload=%q", r.Mesh, r.Name, r.Workload)
	return tok, nil
}

// Proxies lists every node id that opened an authenticated ADS stream.
// Connected is kuma-cp's: true once the registration's CacheExpiration
// sleep ended, false from the moment the stream closed.
func (s *Server) Proxies() []ProxyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProxyInfo, 0, len(s.proxies))
	for _, p := range s.proxies {
		info := p.info
		info.ACKed = sortedKeys(p.acked)
		info.Listeners = sortedKeys(p.listeners)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxRecords bounds the /bootstrap requests kept: a test control plane left
// running with proxies waiting for a mesh would otherwise grow for good.
const maxRecords = 1000

// BootstrapRequests returns the /bootstrap requests received so far, the
// newest maxRecords of them, oldest first.
func (s *Server) BootstrapRequests() []BootstrapRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]BootstrapRecord, len(s.records))
	copy(out, s.records)
	return out
}

// DroppedBootstrapRequests is how many of the oldest records were let go.
func (s *Server) DroppedBootstrapRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

func (s *Server) addRecord(r BootstrapRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == maxRecords {
		copy(s.records, s.records[1:])
		s.records = s.records[:maxRecords-1]
		s.dropped++
	}
	s.records = append(s.records, r)
}

// Close stops every listener and stream.
func (s *Server) Close() error {
	s.cancel()
	s.dp.mu.Lock()
	s.dp.closed = true
	s.closeAllLocked()
	s.dp.mu.Unlock()
	var err error
	if s.adminServer != nil {
		err = s.adminServer.Close()
	}
	s.grpcServer.Stop()
	return err
}
