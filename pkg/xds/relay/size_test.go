package relay

import (
	"strings"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"
)

// A response over the relay's bound never reaches Envoy: it is counted and
// said, and the relay asks again, taking the next answer. One under the
// bound, however large, is relayed as usual.
func TestResponsesOverTheBoundAreNotRelayed(t *testing.T) {
	const bound = 1 << 20
	for _, tt := range []struct {
		name         string
		firstPad     int // the first stream's response carries a listener this large
		wantVersion  string
		wantRejected float64
	}{
		{name: "over the bound", firstPad: 2 * bound, wantVersion: "2", wantRejected: 1},
		{name: "large, under the bound", firstPad: bound / 2, wantVersion: "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPKI(t)
			var streams atomic.Int32
			cp := startFakeCP(t, p, "", func(s *cpStream) error {
				if _, err := s.recv(); err != nil {
					return nil
				}
				if streams.Add(1) == 1 {
					resp := deltaResponse(t, listenerType, "1", "n1")
					resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: "big", Version: "1", Resource: listener(t, "big", tt.firstPad)})
					return s.answerAndHold(mustMarshal(t, resp))
				}
				return s.answerAndHold(mustMarshal(t, deltaResponse(t, listenerType, "2", "n2", "small")))
			})
			core, logs := zapobserver.New(zap.InfoLevel)
			r := startRelay(t, p, cp.addr, staticToken("tok"), nil, func(o *Options) {
				o.MaxResponseBytes, o.Log = bound, zap.New(core)
			})
			envoy := dialEnvoy(t, r, deltaMethod)
			envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
			if got := envoy.recvDelta().GetSystemVersionInfo(); got != tt.wantVersion {
				t.Fatalf("Envoy's first response is version %q, want %q", got, tt.wantVersion)
			}
			if got := testutil.ToFloat64(r.met.init().responses.WithLabelValues("too_large")); got != tt.wantRejected {
				t.Fatalf("zoneproxy_xds_responses_rejected_total{reason=\"too_large\"} %v, want %v", got, tt.wantRejected)
			}
			said := logs.FilterMessageSnippet("larger than the relay accepts").All()
			if tt.wantRejected == 0 {
				if len(said) != 0 {
					t.Fatalf("said %v", said)
				}
				return
			}
			if len(said) != 1 || said[0].ContextMap()["bound"] != int64(bound) || said[0].ContextMap()["bytes"].(int64) <= bound {
				t.Fatalf("the log line names no size and bound: %v", said)
			}
			if st := r.State(); st.LastError == nil || !strings.Contains(st.LastError.Message, "larger than max") {
				t.Fatalf("state %+v", st)
			}
		})
	}
}
