package relay

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// WriteMetrics writes the relay's metrics as the agent's page shows them,
// in Prometheus text format: for the tests that look for one sample.
func (r *Relay) WriteMetrics(w io.Writer) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.Metrics())
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	enc := expfmt.NewEncoder(w, expfmt.FmtText)
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			panic(err)
		}
	}
}

func idleRelay(t *testing.T, now time.Time) *Relay {
	t.Helper()
	r, err := New(Options{
		SocketPath: "unused.sock", Upstream: cpdial.Target{Address: "cp.example:5678"},
		Token: staticToken("tok"), Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A relay before its first stream: every upstream state at 0, not on the
// cache, no errors or refusals yet, so no code or type series.
func TestFreshRelayMetrics(t *testing.T) {
	r := idleRelay(t, time.Now())
	want := `# HELP zoneproxy_xds_cached_config 1 while Envoy runs on the last-known-good configuration from the cache.
# TYPE zoneproxy_xds_cached_config gauge
zoneproxy_xds_cached_config 0
# HELP zoneproxy_xds_cached_config_age_seconds Age of the cached configuration Envoy runs on (0 when it runs on the control plane's).
# TYPE zoneproxy_xds_cached_config_age_seconds gauge
zoneproxy_xds_cached_config_age_seconds 0
# HELP zoneproxy_xds_streams_held_total Streams kuma-cp refused because it still held this proxy's previous one (after a restart; not counted as errors).
# TYPE zoneproxy_xds_streams_held_total counter
zoneproxy_xds_streams_held_total 0
# HELP zoneproxy_xds_upstream What the control plane is expected to make of this proxy, from its streams: 1 for the current state.
# TYPE zoneproxy_xds_upstream gauge
zoneproxy_xds_upstream{state="another-proxy"} 0
zoneproxy_xds_upstream{state="connected"} 0
zoneproxy_xds_upstream{state="held"} 0
zoneproxy_xds_upstream{state="refused"} 0
zoneproxy_xds_upstream{state="unanswered"} 0
zoneproxy_xds_upstream{state="unreachable"} 0
zoneproxy_xds_upstream{state="unserved"} 0
zoneproxy_xds_upstream{state="withdrawn"} 0
`
	if err := testutil.CollectAndCompare(r.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// What the relay counted and what it is in, as a scrape reads it.
func TestRelayMetricsFollowTheRelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := idleRelay(t, now)
	r.met.streamError("Unavailable")
	r.met.streamError("Unavailable")
	r.met.streamError("Unknown")
	r.met.rejected("Listener")
	r.met.rejected("bad\xffname") // invalid UTF-8 must not stop the page
	r.met.held()
	r.setUpstream(Unreachable)
	r.mu.Lock()
	r.cache = CacheState{InUse: true, Since: now, WrittenAt: now.Add(-90 * time.Second)}
	r.mu.Unlock()
	want := `# HELP zoneproxy_xds_cached_config 1 while Envoy runs on the last-known-good configuration from the cache.
# TYPE zoneproxy_xds_cached_config gauge
zoneproxy_xds_cached_config 1
# HELP zoneproxy_xds_cached_config_age_seconds Age of the cached configuration Envoy runs on (0 when it runs on the control plane's).
# TYPE zoneproxy_xds_cached_config_age_seconds gauge
zoneproxy_xds_cached_config_age_seconds 90
# HELP zoneproxy_xds_rejected_total Configurations Envoy rejected (NACK), by resource type.
# TYPE zoneproxy_xds_rejected_total counter
zoneproxy_xds_rejected_total{type="Listener"} 1
zoneproxy_xds_rejected_total{type="bad\ufffdname"} 1
# HELP zoneproxy_xds_stream_errors_total xDS streams to the control plane that failed or that it ended with an error, by gRPC code.
# TYPE zoneproxy_xds_stream_errors_total counter
zoneproxy_xds_stream_errors_total{code="Unavailable"} 2
zoneproxy_xds_stream_errors_total{code="Unknown"} 1
# HELP zoneproxy_xds_streams_held_total Streams kuma-cp refused because it still held this proxy's previous one (after a restart; not counted as errors).
# TYPE zoneproxy_xds_streams_held_total counter
zoneproxy_xds_streams_held_total 1
# HELP zoneproxy_xds_upstream What the control plane is expected to make of this proxy, from its streams: 1 for the current state.
# TYPE zoneproxy_xds_upstream gauge
zoneproxy_xds_upstream{state="another-proxy"} 0
zoneproxy_xds_upstream{state="connected"} 0
zoneproxy_xds_upstream{state="held"} 0
zoneproxy_xds_upstream{state="refused"} 0
zoneproxy_xds_upstream{state="unanswered"} 0
zoneproxy_xds_upstream{state="unreachable"} 1
zoneproxy_xds_upstream{state="unserved"} 0
zoneproxy_xds_upstream{state="withdrawn"} 0
`
	want = strings.ReplaceAll(want, `\ufffd`, "\ufffd")
	if err := testutil.CollectAndCompare(r.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
