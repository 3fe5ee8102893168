package bench

import (
	"fmt"
	"strings"
)

// EnvoyStats renders a /stats?format=prometheus body as Envoy writes it
// (families sorted, counters, then gauges, text readouts, histograms; a
// blank line after each family) for a zone proxy with many clusters, a
// few of them the control plane's own. It stops adding clusters once the
// body has about lines lines.
func EnvoyStats(lines int) string {
	clusterCounters := []string{
		"assignment_stale", "assignment_timeout_received", "bind_errors", "default_total_match_count",
		"lb_healthy_panic", "lb_local_cluster_not_ok", "lb_recalculate_zone_structures", "lb_subsets_created",
		"lb_subsets_fallback", "lb_subsets_removed", "lb_subsets_selected", "lb_zone_cluster_too_small",
		"lb_zone_no_capacity_left", "lb_zone_routing_all_directly", "membership_change", "original_dst_host_invalid",
		"retry_or_shadow_abandoned", "update_attempt", "update_empty", "update_failure", "update_no_rebuild",
		"update_success", "upstream_cx_close_notify", "upstream_cx_connect_attempts_exceeded",
		"upstream_cx_connect_fail", "upstream_cx_connect_timeout", "upstream_cx_destroy",
		"upstream_cx_destroy_local", "upstream_cx_destroy_remote", "upstream_cx_http1_total",
		"upstream_cx_http2_total", "upstream_cx_idle_timeout", "upstream_cx_max_requests",
		"upstream_cx_none_healthy", "upstream_cx_overflow", "upstream_cx_pool_overflow",
		"upstream_cx_protocol_error", "upstream_cx_rx_bytes_total", "upstream_cx_total",
		"upstream_cx_tx_bytes_total", "upstream_flow_control_backed_up_total", "upstream_rq",
		"upstream_rq_cancelled", "upstream_rq_completed", "upstream_rq_maintenance_mode",
		"upstream_rq_pending_failure_eject", "upstream_rq_pending_overflow", "upstream_rq_pending_total",
		"upstream_rq_per_try_timeout", "upstream_rq_retry", "upstream_rq_retry_overflow",
		"upstream_rq_retry_success", "upstream_rq_rx_reset", "upstream_rq_timeout", "upstream_rq_total",
		"upstream_rq_tx_reset", "upstream_rq_xx",
	}
	clusterGauges := []string{
		"circuit_breakers_default_cx_open", "circuit_breakers_default_cx_pool_open",
		"circuit_breakers_default_rq_open", "circuit_breakers_default_rq_pending_open",
		"circuit_breakers_default_rq_retry_open", "lb_subsets_active", "max_host_weight",
		"membership_degraded", "membership_excluded", "membership_healthy", "membership_total",
		"upstream_cx_active", "upstream_cx_rx_bytes_buffered", "upstream_cx_tx_bytes_buffered",
		"upstream_rq_active", "upstream_rq_pending_active", "version",
	}
	clusterHistograms := []string{"upstream_cx_connect_ms", "upstream_cx_length_ms", "upstream_rq_time"}
	buckets := []string{"0.5", "1", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000",
		"10000", "30000", "60000", "300000", "600000", "1800000", "3600000"}

	perCluster := len(clusterCounters) + len(clusterGauges) + len(clusterHistograms)*(len(buckets)+3)
	n := lines / perCluster
	clusters := make([]string, n)
	for i := range clusters {
		switch {
		case i%25 == 0:
			clusters[i] = fmt.Sprintf("system_meshmetric_prometheus_%d", i)
		case i%25 == 1:
			clusters[i] = fmt.Sprintf("_kuma_internal_%d", i)
		default:
			clusters[i] = fmt.Sprintf("payments_svc-%04d_payments_svc_8080", i)
		}
	}
	var b strings.Builder
	family := func(name, typ string, lines func(name string)) {
		fmt.Fprintf(&b, "# TYPE envoy_cluster_%s %s\n", name, typ)
		lines("envoy_cluster_" + name)
		b.WriteString("\n")
	}
	for i, c := range clusterCounters {
		family(c, "counter", func(name string) {
			for j, cl := range clusters {
				if c == "upstream_rq" {
					fmt.Fprintf(&b, "%s{envoy_cluster_name=\"%s\",envoy_response_code=\"200\"} %d\n", name, cl, 1000+i*j)
					continue
				}
				fmt.Fprintf(&b, "%s{envoy_cluster_name=\"%s\"} %d\n", name, cl, i*j)
			}
		})
	}
	for i, g := range clusterGauges {
		family(g, "gauge", func(name string) {
			for j, cl := range clusters {
				fmt.Fprintf(&b, "%s{envoy_cluster_name=\"%s\"} %d\n", name, cl, (i+j)%7)
			}
		})
	}
	b.WriteString("# TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n\n")
	b.WriteString("# TYPE envoy_control_plane_identifier gauge\nenvoy_control_plane_identifier{text_value=\"kuma-cp-7d9f\"} 1\n\n")
	for _, h := range clusterHistograms {
		family(h, "histogram", func(name string) {
			for j, cl := range clusters {
				for k, le := range buckets {
					fmt.Fprintf(&b, "%s_bucket{envoy_cluster_name=\"%s\",le=\"%s\"} %d\n", name, cl, le, j+k)
				}
				fmt.Fprintf(&b, "%s_bucket{envoy_cluster_name=\"%s\",le=\"+Inf\"} %d\n", name, cl, j+len(buckets))
				fmt.Fprintf(&b, "%s_sum{envoy_cluster_name=\"%s\"} %d.25\n", name, cl, 100*j)
				fmt.Fprintf(&b, "%s_count{envoy_cluster_name=\"%s\"} %d\n", name, cl, j+len(buckets))
			}
		})
	}
	return b.String()
}
