package e2e

import (
	"context"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// otlpCollector is an OTLP/gRPC metrics receiver on loopback TCP, the
// MeshOpenTelemetryBackend's endpoint. Envoy's direct-mode listener on the
// kuma-otel socket carries the agent's pushes to it.
func otlpCollector(t *testing.T) (port int, pushes <-chan *metricspb.MetricsData) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *metricspb.MetricsData, 100)
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.metrics.v1.MetricsService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Export", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req metricspb.MetricsData // wire-identical to ExportMetricsServiceRequest
			if err := dec(&req); err != nil {
				return nil, err
			}
			select {
			case ch <- &req:
			default:
			}
			return &emptypb.Empty{}, nil
		}}},
	}, nil)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().(*net.TCPAddr).Port, ch
}

func TestMeshMetricOpenTelemetryPushesAtTheInterval(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	const name = "zp-otel"
	port, pushes := otlpCollector(t)
	if err := zone.CP.SetMeshMetric("payments", name, "zp-otel-metrics", controlplane.MeshMetric{
		Backends: []controlplane.MetricsBackend{{Type: "OpenTelemetry", OpenTelemetry: &controlplane.OpenTelemetryBackend{
			Name: "otel-collector", Endpoint: controlplane.OTelEndpoint{Address: "127.0.0.1", Port: uint32(port)}, RefreshInterval: "1s",
		}}},
	}); err != nil {
		t.Fatal(err)
	}
	p, agent := namedProxy(t, zone, "payments", "egress", name)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)

	var first *metricspb.MetricsData
	select {
	case first = <-pushes:
	case <-time.After(promptly):
		t.Fatalf("no OTLP push reached the collector\n%s", agent.Output())
	}
	// Pushes keep coming at the refresh interval (a second one proves it).
	select {
	case <-pushes:
	case <-time.After(promptly):
		t.Fatal("only one push")
	}
	var names []string
	attrs := map[string]string{}
	for _, rm := range first.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				names = append(names, m.GetName())
				for _, dp := range append(m.GetGauge().GetDataPoints(), m.GetSum().GetDataPoints()...) {
					for _, kv := range dp.GetAttributes() {
						attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
					}
				}
			}
		}
	}
	if !slices.Contains(names, "envoy_server_live") {
		t.Errorf("push lacks envoy_server_live: %v", names)
	}
	if attrs["mesh"] != "payments" || attrs["kuma.proxy_role"] != "zone-egress" {
		t.Errorf("extra labels not attributes: %v", attrs)
	}

	// The policy removed: pushes stop.
	zone.CP.DeleteMeshMetric("payments", name, "zp-otel-metrics")
	agent.AwaitLog("MeshMetric policy removed", promptly)
	for len(pushes) > 0 {
		<-pushes
	}
	select {
	case <-pushes:
		t.Fatal("pushes go on after the policy was removed")
	case <-time.After(3 * time.Second): // three refresh intervals
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
