package relay

import (
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// Options configures a Relay.
type Options struct {
	// SocketPath is where Envoy connects (the rewritten bootstrap's ADS
	// cluster); created 0600, a stale socket there is replaced.
	SocketPath string
	// Listener, when set, is SocketPath opened ahead with Listen (while
	// the bootstrap is fetched); Start serves on it, Close closes it.
	Listener net.Listener
	// Upstream is how to reach the control plane, as the bootstrap
	// (bootstraprewrite) or the cache gave it.
	Upstream cpdial.Target
	// Token returns the dataplane token; called for every new upstream
	// stream, so a rotated token file applies at the next reconnect. An
	// error (a file being replaced) is retried with Backoff.
	Token func() (string, error)
	// Cache, when set, is fed with what Envoy ACKs and served while the
	// control plane is unreachable.
	Cache *lkgcache.Cache
	// Backoff paces retries of "already an active stream", token reads
	// and reconnection attempts while Envoy runs from the cache.
	Backoff backoff.Backoff
	// MaxResponseBytes bounds a control-plane response the relay accepts
	// (0: DefaultMaxResponseBytes); the bootstrap's own limit, if lower,
	// wins.
	MaxResponseBytes int
	// CacheFirst: Envoy was started on the cache because the control
	// plane did not answer; its first ADS stream is served from the cache
	// at once, while the relay tries the control plane.
	CacheFirst bool
	// CacheFirstHeld: Envoy runs already and its agent replaced itself (a
	// reload); kuma-cp holds the previous program's stream, as after a
	// restart, which is why the cache comes first, not an outage.
	CacheFirstHeld bool
	// AgentMetadata, if set, rewrites the node metadata in the first
	// request of each ADS stream the relay opens upstream: kuma-cp reads
	// what it shows of the agent (its build) from there, and after a
	// reload to a new agent the running Envoy's node still describes the
	// old one.
	AgentMetadata func(md *structpb.Struct, deltaADS bool)
	// ConnectTimeout bounds TCP connect plus TLS handshake (default 3 s:
	// Envoy's ADS cluster allows 1 s to connect, TLS adds round trips). A
	// control plane that does not answer within it counts as unreachable.
	ConnectTimeout time.Duration
	// UnansweredAfter is how long an accepted ADS stream goes without a
	// response before the relay says so (Events.Unanswered); default
	// DefaultUnansweredAfter.
	UnansweredAfter time.Duration
	Log             *zap.Logger
	Events          Events
	Now             func() time.Time
}

// Events are called from the relay's goroutines, so they must not block.
// Any may be nil.
type Events struct {
	// StreamError: an upstream stream could not be opened or the control
	// plane ended it with an error.
	StreamError func(StreamError)
	// Rejected: Envoy NACKed a configuration.
	Rejected func(Rejection)
	// Accepted: Envoy ACKed a configuration.
	Accepted func(Acceptance)
	// CachedConfig: Envoy started or stopped running on the cached
	// configuration.
	CachedConfig func(CacheState)
	// Upstream: what the control plane makes of this proxy changed.
	Upstream func(Upstream)
	// Unanswered: the control plane accepted an ADS stream of protocol
	// ("delta" or "state-of-the-world") and has not answered it in time.
	Unanswered func(UnansweredStream)
}

// Upstream is what the control plane is expected to make of this proxy,
// from what its streams told the relay.
type Upstream struct {
	State UpstreamState
	Since time.Time
}

// UpstreamState is one of the states below; "" before the first stream.
type UpstreamState string

const (
	// Connected: a stream of this proxy is accepted; kuma-cp has its
	// Dataplane and configures it.
	Connected UpstreamState = "connected"
	// Held: kuma-cp still holds the stream of this proxy's previous run
	// and refuses new ones until it has deregistered it: the old
	// Dataplane stays until its deregistration delay (10 s by default)
	// is over, then it is deleted and registered anew from the next
	// accepted stream.
	Held UpstreamState = "held"
	// AnotherProxy: refusals like Held went on far longer than any
	// deregistration delay: another proxy holds this name's stream.
	AnotherProxy UpstreamState = "another-proxy"
	// Unreachable: no answer from the control plane.
	Unreachable UpstreamState = "unreachable"
	// Refused: the control plane refused the stream (its reason is in
	// the stream error).
	Refused UpstreamState = "refused"
	// Withdrawn: the proxy left kuma-cp's zone egress set before its
	// listeners close (a stop or a drain): its Dataplane is registered
	// with its egress listeners NotReady.
	Withdrawn UpstreamState = "withdrawn"
	// Unserved: the control plane refused the ADS protocol Envoy speaks as
	// gRPC refuses a method it does not serve (Unimplemented): kuma-cp 3.0
	// and state of the world. It answers, so it is not Unreachable.
	Unserved UpstreamState = "unserved"
	// Unanswered: the control plane accepted the stream and has not
	// answered it for Options.UnansweredAfter (kuma-cp master on a state
	// of the world stream, or a control plane that is slow to build it).
	Unanswered UpstreamState = "unanswered"
	// NoStream: the proxy's stream was closed and none is open, e.g. after
	// a withdrawal that failed before it reached the control plane.
	NoStream UpstreamState = ""
)

// StreamError is an upstream stream's end, as the control plane put it.
type StreamError struct {
	Code    codes.Code
	Message string // the gRPC status message, e.g. kuma-cp's "authentication failed: …"
	// Unreachable: the control plane could not be reached (the cache may
	// be served); otherwise it answered and refused.
	Unreachable bool
	// Retrying: the relay retries by itself (another stream of this node
	// is still active, or the token file is being replaced).
	Retrying bool
	// Local: the relay could not read the token; nothing reached the
	// control plane.
	Local bool
	// Held: kuma-cp refused the stream because it still holds this node's
	// previous one, which it releases once its deregistration delay is
	// over: expected after a restart. Retrying is set too.
	Held bool
	// TooLarge: a response was over Options.MaxResponseBytes; it was
	// neither relayed nor cached. Retrying is set too: the cache serves
	// meanwhile, if it may.
	TooLarge bool
	// Unserved: the control plane does not serve this ADS protocol
	// (Unimplemented). Retrying is set too: the cache serves meanwhile, if
	// it may, and the agent decides whether Envoy must change protocol.
	Unserved bool
	// Attempt and Next: the relay's own retry (Retrying, or reconnection
	// attempts while Envoy runs from the cache); zero when Envoy's
	// reconnect is the retry.
	Attempt int
	Next    time.Duration
}

func (e StreamError) String() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Rejection is one NACK.
type Rejection struct {
	TypeURL   string
	Names     []string // resources of the rejected response
	Version   string
	Message   string // Envoy's error_detail
	FromCache bool
}

// Acceptance is one ACK.
type Acceptance struct {
	TypeURL   string
	Names     []string
	Version   string
	FromCache bool
}

// CacheState says whether Envoy runs on the cached configuration.
type CacheState struct {
	InUse bool `json:"inUse"`
	// Held: served because kuma-cp holds this node's previous stream (a
	// restart), not because it is unreachable.
	Held      bool      `json:"held"`
	Since     time.Time `json:"since"`     // when the relay started serving it
	WrittenAt time.Time `json:"writtenAt"` // when that configuration was last confirmed by the control plane
}

// State is the relay's view now, for readiness and status lines.
type State struct {
	Cache     CacheState
	Upstream  Upstream
	LastError *StreamError // of the current outage, nil once configuration flows again
}

// DefaultMaxResponseBytes is 32 MiB: the largest response of a zone ingress
// with 5,000 services (its endpoints, 2.8 MB) about 11 times over, and
// 10,000 services' (5.7 MB) more than 5 times.
const DefaultMaxResponseBytes = 32 << 20
