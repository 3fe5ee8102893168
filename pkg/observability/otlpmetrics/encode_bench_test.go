package otlpmetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

// zoneProxyStats is Envoy-like stats for clusters clusters: counters,
// gauges and three 20-bucket histograms each.
func zoneProxyStats(clusters int) string {
	var b strings.Builder
	for _, c := range []string{"upstream_rq_total", "upstream_cx_total", "upstream_rq_5xx", "upstream_cx_destroy", "upstream_rq_timeout"} {
		fmt.Fprintf(&b, "# TYPE envoy_cluster_%s counter\n", c)
		for i := range clusters {
			fmt.Fprintf(&b, "envoy_cluster_%s{envoy_cluster_name=\"svc%d_payments_svc_80\"} %d\n", c, i, i*7)
		}
	}
	fmt.Fprint(&b, "# TYPE envoy_cluster_membership_healthy gauge\n")
	for i := range clusters {
		fmt.Fprintf(&b, "envoy_cluster_membership_healthy{envoy_cluster_name=\"svc%d_payments_svc_80\"} 1\n", i)
	}
	for _, h := range []string{"upstream_rq_time", "upstream_cx_length_ms", "upstream_cx_connect_ms"} {
		fmt.Fprintf(&b, "# TYPE envoy_cluster_%s histogram\n", h)
		for i := range clusters {
			for j, le := range []string{"0.5", "1", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000", "10000", "30000", "60000", "300000", "600000", "1800000", "3600000", "+Inf"} {
				fmt.Fprintf(&b, "envoy_cluster_%s_bucket{envoy_cluster_name=\"svc%d_payments_svc_80\",le=\"%s\"} %d\n", h, i, le, j)
			}
			fmt.Fprintf(&b, "envoy_cluster_%s_sum{envoy_cluster_name=\"svc%d_payments_svc_80\"} 100\n", h, i)
			fmt.Fprintf(&b, "envoy_cluster_%s_count{envoy_cluster_name=\"svc%d_payments_svc_80\"} 19\n", h, i)
		}
	}
	return b.String()
}

// BenchmarkEncode measures one push's request, built and encoded as gRPC
// sends it, parsing excluded.
func BenchmarkEncode(b *testing.B) {
	text := zoneProxyStats(40)
	extra := map[string]string{"mesh": "payments", "zone": "default", "kuma.proxy_role": "zone-egress"}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fams, err := meshmetric.ParseText(text)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		req := newConverter(extra, time.Now(), time.Time{}).request(resource(), "kuma", "v", fams)
		buf, err := proto.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(buf)))
	}
}
