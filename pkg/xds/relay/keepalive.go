package relay

import (
	"time"

	"google.golang.org/grpc/keepalive"
)

// A control plane that stops answering (kuma-cp stopped with SIGSTOP, a
// host that froze, a network path that drops everything) leaves its TCP
// connection open: the kernel, or a middlebox, keeps acknowledging TCP
// keepalive probes, and nothing else ever fails. HTTP/2 pings answered by
// the control plane's gRPC transport are what show it is alive: the relay
// pings when it has heard nothing from the control plane for
// upstreamKeepaliveTime and closes the connection when the ping is not
// answered within upstreamKeepaliveTimeout. The stream then ends as
// Unavailable, the relay reports the control plane unreachable, and Envoy
// is served the last-known-good configuration, as for any other outage.
//
// A slow control plane is not a hung one: the ping is answered by its gRPC
// transport, whatever its handlers are doing, so a configuration that
// takes minutes to compute does not end the stream.

const (
	// kumaKeepaliveMinTime is kuma-cp's DP server's
	// keepalive.EnforcementPolicy MinTime (pkg/dp-server/server/server.go,
	// GrpcKeepAliveTime): a client pinging more often gets a GOAWAY
	// (ENHANCE_YOUR_CALM, "too_many_pings") after its third offence. The
	// server also pings every 15 s of silence itself (ServerParameters.Time),
	// which keeps the relay's own pings from being needed while it lives.
	kumaKeepaliveMinTime = 15 * time.Second

	// upstreamKeepaliveTime is how long the relay hears nothing from the
	// control plane before it pings: a third above kuma-cp's MinTime, so
	// that timer jitter never makes a ping look early.
	upstreamKeepaliveTime = 20 * time.Second
	// upstreamKeepaliveTimeout is how long an unanswered ping is waited
	// for before the connection counts as dead: gRPC's default, above
	// kuma-cp's own 15 s for the pings it sends to its clients.
	upstreamKeepaliveTimeout = 20 * time.Second
)

// upstreamKeepalive is what newConn dials with; tests shorten it.
var upstreamKeepalive = keepalive.ClientParameters{
	Time:    upstreamKeepaliveTime,
	Timeout: upstreamKeepaliveTimeout,
	// Each connection carries one stream; a spare one waiting for the next
	// attempt has none and needs no pings.
	PermitWithoutStream: false,
}
