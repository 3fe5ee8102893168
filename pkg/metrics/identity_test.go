package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// A dashboard joins on zoneproxy_info and an alert reads the expiries;
// what the agent does not know yet is absent, never a 0 that would fire
// "expired in 1970".
func TestIdentityAndExpiries(t *testing.T) {
	token := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	cert := time.Date(2026, 12, 1, 0, 0, 0, 500e6, time.UTC)
	for _, tc := range []struct {
		name string
		set  func(*Metrics)
		want string
	}{
		{"nothing known", func(*Metrics) {}, ""},
		{"identity", func(m *Metrics) { m.SetIdentity("payments", "egress", "vm-1-egress") },
			`zoneproxy_info{mesh="payments",name="vm-1-egress",role="egress"} 1`},
		{"expiries", func(m *Metrics) {
			m.SetTokenExpiry(token)
			m.WatchCacheCertificateExpiry(func() time.Time { return cert })
		},
			"zoneproxy_cache_certificate_expiry_timestamp_seconds 1.7960832005e+09\n" +
				"zoneproxy_token_expiry_timestamp_seconds 1.798859045e+09"},
		{"token without expiry", func(m *Metrics) { m.SetTokenExpiry(token); m.SetTokenExpiry(time.Time{}) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(state.NewTracker())
			tc.set(m)
			names := []string{"zoneproxy_info", "zoneproxy_token_expiry_timestamp_seconds", "zoneproxy_cache_certificate_expiry_timestamp_seconds"}
			var got []string
			for _, line := range strings.Split(scrape(t, m), "\n") {
				for _, n := range names {
					if strings.HasPrefix(line, n+" ") || strings.HasPrefix(line, n+"{") {
						got = append(got, line)
					}
				}
			}
			if g := strings.Join(got, "\n"); g != tc.want {
				t.Errorf("got\n%s\nwant\n%s", g, tc.want)
			}
			if _, err := testutil.GatherAndCount(m.reg, names...); err != nil {
				t.Errorf("the registry does not gather: %v", err)
			}
		})
	}
}
