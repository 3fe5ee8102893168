package relay

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// A handover to an Envoy of another ADS protocol (kuma-cp 3.0 refuses
// state of the world): the new Envoy opens its own stream, and once the
// control plane answered it, the old protocol opens nothing upstream any
// more (the old Envoy reconnecting while it drains would close the new
// stream: one per node). A handover that fails gives the old protocol back.
func TestAHandoverToAnotherProtocolRetiresTheOldOne(t *testing.T) {
	for _, tc := range []struct {
		name          string
		deltaAnswered bool
	}{
		{"the new stream answered", true},
		{"the new stream never answered", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPKI(t)
			var sotwOpened atomic.Int32
			cp := startFakeCP(t, p, "", func(s *cpStream) error {
				if s.method == "StreamAggregatedResources" {
					sotwOpened.Add(1)
					return grpcstatus.Error(codes.Unimplemented, "unknown method StreamAggregatedResources")
				}
				if !tc.deltaAnswered {
					for {
						if _, err := s.recv(); err != nil {
							return nil
						}
					}
				}
				return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "1", "1", "c1")))
			})
			r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
			old := dialEnvoy(t, r, sotwMethod)
			old.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType})
			waitFor(t, "the state-of-the-world stream refused", func() bool { return r.State().Upstream.State == Unserved })

			r.BeginHandover(notThisProcess)
			next := dialEnvoy(t, r, deltaMethod)
			next.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType, ResourceNamesSubscribe: []string{"*"}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := r.CompleteHandover(ctx)
			cancel()
			if tc.deltaAnswered != (err == nil) {
				t.Fatalf("CompleteHandover: %v", err)
			}
			r.EndHandover()
			before := sotwOpened.Load()
			again := dialEnvoy(t, r, sotwMethod) // the old Envoy reconnecting
			again.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType})
			if tc.deltaAnswered {
				if got := next.recvDelta(); len(got.GetResources()) != 1 {
					t.Errorf("the new Envoy got %v, want the control plane's answer", got)
				}
				time.Sleep(300 * time.Millisecond) // nothing to await: the old protocol must open nothing
				if n := sotwOpened.Load(); n != before {
					t.Errorf("the retired protocol opened %d streams upstream", n-before)
				}
				return
			}
			waitFor(t, "the old protocol to open upstream again", func() bool { return sotwOpened.Load() > before })
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
