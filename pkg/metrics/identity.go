package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Who the proxy is, and when what it needs expires: the series a fleet's
// dashboards and alerts join and filter on.
var (
	infoDesc = prometheus.NewDesc("zoneproxy_info",
		"The zone proxy this agent runs: its mesh, role and name (1).", []string{"mesh", "role", "name"}, nil)
	tokenExpiryDesc = prometheus.NewDesc("zoneproxy_token_expiry_timestamp_seconds",
		"When the dataplane token expires (Unix seconds); absent for a token without an expiry.", nil, nil)
	cacheCertExpiryDesc = prometheus.NewDesc("zoneproxy_cache_certificate_expiry_timestamp_seconds",
		"The earliest certificate expiry in the last-known-good cache (Unix seconds); absent without a cache or certificates.", nil, nil)
)

// identity collects the series above; what is not known yet is left out.
type identity struct {
	mu              sync.Mutex
	mesh, role, nm  string
	tokenExpiry     time.Time
	cacheCertExpiry func() time.Time // read at each scrape
}

func (*identity) Describe(ch chan<- *prometheus.Desc) {
	ch <- infoDesc
	ch <- tokenExpiryDesc
	ch <- cacheCertExpiryDesc
}

func (i *identity) Collect(ch chan<- prometheus.Metric) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.mesh != "" {
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, LabelValue(i.mesh), LabelValue(i.role), LabelValue(i.nm))
	}
	var cacheCert time.Time
	if i.cacheCertExpiry != nil {
		cacheCert = i.cacheCertExpiry()
	}
	for _, e := range []struct {
		desc *prometheus.Desc
		at   time.Time
	}{{tokenExpiryDesc, i.tokenExpiry}, {cacheCertExpiryDesc, cacheCert}} {
		if !e.at.IsZero() {
			ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, float64(e.at.UnixMilli())/1e3)
		}
	}
}

// SetIdentity names the zone proxy on zoneproxy_info.
func (m *Metrics) SetIdentity(mesh, role, name string) {
	m.updateIdentity(func(i *identity) { i.mesh, i.role, i.nm = mesh, role, name })
}

// SetTokenExpiry records the dataplane token's expiry; the zero time
// (a token without one) leaves the series out.
func (m *Metrics) SetTokenExpiry(at time.Time) {
	m.updateIdentity(func(i *identity) { i.tokenExpiry = at })
}

// WatchCacheCertificateExpiry reads the earliest certificate expiry in
// the last-known-good cache at each scrape; the zero time leaves the
// series out.
func (m *Metrics) WatchCacheCertificateExpiry(earliest func() time.Time) {
	m.updateIdentity(func(i *identity) { i.cacheCertExpiry = earliest })
}

func (m *Metrics) updateIdentity(set func(*identity)) {
	if m == nil {
		return
	}
	m.id.mu.Lock()
	set(&m.id)
	m.id.mu.Unlock()
}
