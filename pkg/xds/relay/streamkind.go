package relay

import (
	"errors"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// streamKind is what differs between delta ADS, state-of-the-world ADS
// and HDS: how messages are read and observed, and how the cache answers.
type streamKind interface {
	name() string
	method() string
	// exclusive: the control plane allows one such stream per node.
	exclusive() bool
	// cacheable: Envoy may be served from the cache on this stream.
	cacheable() bool
	// incremental: delta xDS, where requests change subscriptions.
	incremental() bool
	// readRequest reads one of Envoy's requests (nil if not ADS);
	// observeRequest records what it says (subscriptions, ACKs, NACKs).
	readRequest(b []byte) (*request, error)
	observeRequest(o *observer, req *request)
	// readResponse reads what the relay tracks of a response (nil if not
	// ADS).
	readResponse(b []byte) (p *pendingResponse, nonce string, err error)
	cacheServer(s *lkgcache.Snapshot) cacheServer
	// resumeRequest opens a resumed stream for one type: what Envoy is
	// subscribed to and holds (see resume.go).
	resumeRequest(node *corev3.Node, typeURL string, names []string, version string, versions map[string]string) ([]byte, error)
}

// discoveryRequest is what delta and state-of-the-world requests share.
type discoveryRequest interface {
	GetNode() *corev3.Node
	GetTypeUrl() string
	GetResponseNonce() string
	GetErrorDetail() *rpcstatus.Status
}

// requestOf reads the fields every request has.
func requestOf(m discoveryRequest) *request {
	return &request{node: m.GetNode(), typeURL: m.GetTypeUrl(), nonce: m.GetResponseNonce(),
		nack: m.GetErrorDetail() != nil, errMsg: m.GetErrorDetail().GetMessage()}
}

// request is what the relay reads of one of Envoy's requests.
type request struct {
	node        *corev3.Node // nil unless the request carries one
	typeURL     string
	nonce       string
	nack        bool
	errMsg      string
	subscribe   []string // delta: subscribed; SotW: the names asked for
	unsubscribe []string
	initial     map[string]string // delta: versions Envoy holds
}

// cacheServer answers Envoy's requests from a snapshot, encoded; nil
// means no answer is due.
type cacheServer interface {
	answer(req *request) ([]byte, error)
}

const (
	adsService      = "envoy.service.discovery.v3.AggregatedDiscoveryService"
	adsMethodPrefix = "/" + adsService + "/"
	hdsService      = "envoy.service.health.v3.HealthDiscoveryService"
	hdsMethod       = "/" + hdsService + "/StreamHealthCheck"
)

// hds is relayed unchanged and unobserved (the relay does not link the
// health-check protos); it is never served from the cache.
type hds struct{}

func (hds) name() string      { return "HDS" }
func (hds) method() string    { return hdsMethod }
func (hds) exclusive() bool   { return false }
func (hds) cacheable() bool   { return false }
func (hds) incremental() bool { return false }

func (hds) readRequest([]byte) (*request, error) { return nil, nil }

func (hds) observeRequest(*observer, *request) {}

func (hds) readResponse([]byte) (*pendingResponse, string, error) { return nil, "", nil }

func (hds) cacheServer(*lkgcache.Snapshot) cacheServer { return nil }

func (hds) resumeRequest(*corev3.Node, string, []string, string, map[string]string) ([]byte, error) {
	return nil, errors.New("HDS is not resumed")
}
