package kumasock

import (
	"strings"
	"testing"
)

func TestNamesFollowTheControlPlanesRule(t *testing.T) {
	long := "/var/lib/zoneproxy/" + strings.Repeat("w", 57) // 76 characters, as seen live
	tests := []struct {
		name, got, want string
	}{
		{"access log", AccessLog("/run/zp", "zp-egress-1", "payments"), "/run/zp/kuma-al-zp-egress-1-payments.sock"},
		{"hijacker", MetricsHijacker("/run/zp", "zp-egress-1", "payments"), "/run/zp/kuma-mh-zp-egress-1-payments.sock"},
		{"dynconf", DynamicConfig("/run/zp"), "/run/zp/kuma-mesh-metric-config.sock"},
		{"otel", OTel("/run/zp", "otel-collector"), "/run/zp/kuma-otel-otel-collector.sock"},
		{"relative without workdir", AccessLog("", "a", "b"), "kuma-al-a-b.sock"},
		{"truncated, not hashed", AccessLog(long, "zp-egress-1", "payments"), long + "/kuma-al-zp-egress-1-p.sock"},
		{"otel truncated", OTel(long, "otel-collector"), long + "/kuma-otel-otel-collec.sock"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, tt.got, tt.want)
		}
		if len(tt.got) > 103 {
			t.Errorf("%s: %d bytes, over a Unix socket's limit", tt.name, len(tt.got))
		}
	}
}
