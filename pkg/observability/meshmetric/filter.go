package meshmetric

import (
	"fmt"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// The Basic profile, as kuma-dp's profiles.go defines it: families whose
// name contains, equals or starts with one of these.
var (
	basicContains = []string{
		// golden signals
		"rq_time", "cx_length_ms", "cx_count", "_rq", "bytes", "timeout", "health_check",
		"lb_healthy_panic", "cx_destroy", "error", "fail", "reset", "eject", "overflow",
		"cancelled", "max_duration_reached", "no_cluster", "no_route", "no_filter_chain",
		"reject", "denied", "days_until_first_cert_expiring",
		// dashboards
		"rbac", "cx_active", "cx_connect", "circuit_breakers", "cx_total", "ssl_handshake",
		"ssl_context_update_by_sds",
	}
	basicExact = []string{
		"envoy_cluster_membership_degraded", "envoy_cluster_membership_healthy",
		"envoy_cluster_membership_total", "envoy_cluster_ssl_handshake",
	}
	basicPrefix = []string{
		"envoy_server", "envoy_control_plane", "envoy_dns_filter", "envoy_dns_cares", "kuma_dp_dns",
	}
)

// Under Basic, samples of the control plane's own plumbing are dropped:
// those whose entity label (isEntityLabel) starts with one of these
// prefixes (kuma-dp's internal, system and MeshTrace cluster prefixes), or
// is one of these names.
var (
	internalPrefixes = []string{"_", "system_", "tracing"}
	internalNames    = []string{"ads_cluster", "access_log_sink", "kuma_envoy_admin", "kuma_metrics_hijacker"}
)

var profileRank = map[string]int{ProfileAll: 0, ProfileBasic: 1, ProfileNone: 2}

type filter struct {
	profile          string // the broadest listed: All, Basic or None
	exclude, include []func(string) bool
}

// newFilter compiles a sidecar section. With no known profile listed the
// profile is Basic; unknown profile names are ignored.
func newFilter(s *Sidecar) (*filter, error) {
	f := &filter{profile: ProfileBasic}
	if s == nil || s.Profiles == nil {
		return f, nil
	}
	best := len(profileRank)
	for _, p := range s.Profiles.AppendProfiles {
		if r, ok := profileRank[p.Name]; ok && r < best {
			best, f.profile = r, p.Name
		}
	}
	var err error
	if f.exclude, err = compileAll("exclude", s.Profiles.Exclude); err != nil {
		return nil, err
	}
	if f.include, err = compileAll("include", s.Profiles.Include); err != nil {
		return nil, err
	}
	return f, nil
}

func compileAll(field string, sels []Selector) ([]func(string) bool, error) {
	out := make([]func(string) bool, 0, len(sels))
	for i, s := range sels {
		m, err := compileSelector(s)
		if err != nil {
			return nil, fmt.Errorf("observability.metrics.sidecar.profiles.%s[%d].match: %w", field, i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Select applies the profile filter to fams, reusing their memory:
// the profile keeps a family or not, any exclude match drops it, any
// include match keeps it; under Basic the internal samples go, and a
// family left without samples goes too, even if included. A nil Config
// (no policy yet) keeps everything, as kuma-dp does.
func (c *Config) Select(fams []*dto.MetricFamily) []*dto.MetricFamily {
	if c == nil {
		return fams
	}
	f := c.filter
	if f == nil { // a Config not built by Parse
		var err error
		if f, err = newFilter(c.Sidecar); err != nil {
			f = &filter{profile: ProfileNone}
		}
	}
	out := fams[:0]
	for _, fam := range fams {
		if !f.keeps(fam.GetName()) {
			continue
		}
		if f.profile == ProfileBasic {
			fam.Metric = slices.DeleteFunc(fam.Metric, internal)
			if len(fam.Metric) == 0 {
				continue
			}
		}
		out = append(out, fam)
	}
	return out
}

func (f *filter) keeps(name string) bool {
	keep := profileKeeps(f.profile, name)
	for _, m := range f.exclude {
		if m(name) {
			keep = false
			break
		}
	}
	if keep {
		return true
	}
	for _, m := range f.include {
		if m(name) {
			return true
		}
	}
	return false
}

func profileKeeps(profile, name string) bool {
	switch profile {
	case ProfileAll:
		return true
	case ProfileNone:
		return false
	}
	for _, s := range basicContains {
		if strings.Contains(name, s) {
			return true
		}
	}
	for _, s := range basicPrefix {
		if strings.HasPrefix(name, s) {
			return true
		}
	}
	for _, s := range basicExact {
		if name == s {
			return true
		}
	}
	return false
}

func internal(m *dto.Metric) bool {
	for _, l := range m.Label {
		if !isEntityLabel(l.GetName()) || l.GetValue() == "" {
			continue
		}
		for _, p := range internalPrefixes {
			if strings.HasPrefix(l.GetValue(), p) {
				return true
			}
		}
		if slices.Contains(internalNames, l.GetValue()) {
			return true
		}
	}
	return false
}

func isEntityLabel(name string) bool {
	switch name {
	case "envoy_cluster_name", "envoy_http_conn_manager_prefix", "envoy_listener_address":
		return true
	}
	return false
}
