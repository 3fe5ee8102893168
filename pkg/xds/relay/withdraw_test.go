package relay

import (
	"context"
	"errors"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// A withdrawal that fails, however it fails, leaves the proxy able to
// serve: the next Envoy stream (an undrain's new Envoy) reaches the
// control plane, and the upstream state never says connected meanwhile.
func TestAFailedWithdrawalLetsTheNextEnvoyStreamThrough(t *testing.T) {
	for _, tt := range []struct {
		name       string
		envoyFirst bool // an Envoy stream is open before the withdrawal
		mark       func(*corev3.Node) error
		withdrawn  func(s *cpStream) error // kuma-cp's answer to the NotReady stream
		wait       time.Duration
	}{
		{name: "no Envoy stream yet", mark: markNotReady, withdrawn: holdSilently, wait: waitLimit},
		{name: "the mark fails", envoyFirst: true, mark: func(*corev3.Node) error { return errors.New("no Dataplane in the node") },
			withdrawn: holdSilently, wait: waitLimit},
		{name: "no answer in time", envoyFirst: true, mark: markNotReady, withdrawn: holdSilently, wait: 500 * time.Millisecond},
		{name: "held until the wait ends", envoyFirst: true, mark: markNotReady,
			withdrawn: func(*cpStream) error { return alreadyActiveStream() }, wait: time.Second},
		{name: "refused", envoyFirst: true, mark: markNotReady,
			withdrawn: func(*cpStream) error { return grpcstatus.Error(codes.PermissionDenied, "not allowed") }, wait: waitLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPKI(t)
			readyStreams := make(chan struct{}, 10)
			cp := startFakeCP(t, p, "", func(s *cpStream) error {
				b, err := s.recv()
				if err != nil {
					return nil
				}
				if resourceOf(decodeDeltaRequest(t, b).GetNode()) == "not ready" {
					return tt.withdrawn(s)
				}
				readyStreams <- struct{}{}
				return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "1", "n1", "c")))
			})
			r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
			if tt.envoyFirst {
				envoy := dialEnvoy(t, r, deltaMethod)
				envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: readyNode(), TypeUrl: clusterType})
				envoy.recvDelta()
				<-readyStreams
			}

			ctx, cancel := context.WithTimeout(context.Background(), tt.wait)
			defer cancel()
			if err := r.Withdraw(ctx, tt.mark); err == nil {
				t.Fatal("the withdrawal succeeded")
			}
			if st := r.State().Upstream.State; st == Connected || st == Withdrawn {
				t.Fatalf("upstream %q after a failed withdrawal whose stream is closed", st)
			}
			if r.Withdrawn() {
				t.Fatal("the relay still parks Envoy's streams after a failed withdrawal")
			}

			next := dialEnvoy(t, r, deltaMethod)
			next.send(&discoveryv3.DeltaDiscoveryRequest{Node: readyNode(), TypeUrl: clusterType})
			select {
			case <-readyStreams:
			case <-time.After(waitLimit):
				t.Fatal("the next Envoy stream never reached the control plane")
			}
			if resp := next.recvDelta(); resp.GetTypeUrl() != clusterType {
				t.Fatalf("the next Envoy got %v", resp)
			}
		})
	}
}

func readyNode() *corev3.Node {
	n := proto.Clone(node).(*corev3.Node)
	n.Metadata, _ = structpb.NewStruct(map[string]any{"dataplane.resource": "ready"})
	return n
}

func markNotReady(n *corev3.Node) error {
	n.GetMetadata().GetFields()["dataplane.resource"] = structpb.NewStringValue("not ready")
	return nil
}

func resourceOf(n *corev3.Node) string {
	return n.GetMetadata().GetFields()["dataplane.resource"].GetStringValue()
}

// holdSilently keeps the stream open without an answer, as a paused
// kuma-cp does.
func holdSilently(s *cpStream) error {
	for {
		if _, err := s.recv(); err != nil {
			return nil
		}
	}
}
