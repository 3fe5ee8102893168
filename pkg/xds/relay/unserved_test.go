package relay

import (
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// A control plane that answers but no longer serves the protocol Envoy
// speaks (kuma-cp 3.0 and state of the world) is never called unreachable:
// refused as an unknown method it is "unserved", accepted and never
// answered it is "unanswered", and the agent hears of either.
func TestAControlPlaneThatNoLongerServesTheProtocolIsNotUnreachable(t *testing.T) {
	tests := []struct {
		name       string
		script     func(s *cpStream) error
		want       UpstreamState
		unanswered bool // Events.Unanswered, else a StreamError marked Unserved
	}{
		{"refused as an unknown method", func(*cpStream) error {
			return grpcstatus.Error(codes.Unimplemented, "unknown method StreamAggregatedResources for service envoy.service.discovery.v3.AggregatedDiscoveryService")
		}, Unserved, false},
		{"accepted and never answered", func(s *cpStream) error {
			for {
				if _, err := s.recv(); err != nil {
					return nil
				}
			}
		}, Unanswered, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPKI(t)
			cp := startFakeCP(t, p, "", tc.script)
			ev := newEvents()
			var mu sync.Mutex
			var unanswered []UnansweredStream
			r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) {
				o.UnansweredAfter = 200 * time.Millisecond
				o.Events.Unanswered = func(u UnansweredStream) {
					mu.Lock()
					unanswered = append(unanswered, u)
					mu.Unlock()
					ev.changed <- struct{}{}
				}
			})
			envoy := dialEnvoy(t, r, sotwMethod)
			envoy.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType})
			ev.await(t, "the agent to hear of it", func(e *events) bool {
				if tc.unanswered {
					mu.Lock()
					defer mu.Unlock()
					return len(unanswered) > 0 && unanswered[0].Protocol() == "state-of-the-world" && !unanswered[0].Delta
				}
				for _, se := range e.errs {
					if se.Unserved && !se.Unreachable && se.Code == codes.Unimplemented {
						return true
					}
				}
				return false
			})
			if got := r.State().Upstream.State; got != tc.want {
				t.Errorf("upstream state %q, want %q", got, tc.want)
			}
		})
	}
}
