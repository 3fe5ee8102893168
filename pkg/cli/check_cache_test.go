package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// The certificate expiry check reports is the one that stops the cache
// from being served.
func TestCheckCacheCertificateExpiry(t *testing.T) {
	written := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	notAfter := written.Add(24 * time.Hour)
	tests := []struct {
		name string
		now  time.Time
		want []string
	}{
		{name: "valid", now: written.Add(time.Hour), want: []string{"[ ok ] cached configuration in ",
			"from 2026-05-01T12:00:00Z (1h0m0s old), made for this proxy, earliest certificate expiry 2026-05-02T12:00:00Z; served only"}},
		{name: "expired", now: notAfter.Add(time.Second), want: []string{"[note] cached configuration in ",
			"earliest certificate expiry 2026-05-02T12:00:00Z; it would not be served: a certificate in the cached configuration expired at 2026-05-02T12:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Mesh: "payments", Name: "zp-1", Role: "egress", CPAddress: "https://cp:5678",
				XDSRelay: true, StateDir: t.TempDir(), StateDirSet: true}
			writeCache(t, cfg, written, notAfter)
			var out bytes.Buffer
			(&checklist{w: &out}).checkCache(cfg, tt.now)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("check says %q, want %q", out.String(), w)
				}
			}
		})
	}
}

// writeCache stores a snapshot with one TLS secret as run would.
func writeCache(t *testing.T, cfg *config.Config, written, notAfter time.Time) {
	t.Helper()
	id := lkgcache.Identity{Mesh: cfg.Mesh, Name: cfg.Name, Role: string(cfg.Role), ControlPlane: cfg.CPAddress}
	c, err := lkgcache.Open(lkgcache.Options{Dir: cfg.StateDir, Identity: id, Now: func() time.Time { return written }})
	if err != nil {
		t.Fatal(err)
	}
	body, err := proto.Marshal(&tlsv3.Secret{Name: "identity", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: testutil.CertPEM(t, notAfter)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Store([]lkgcache.TypeState{{TypeURL: lkgcache.SecretType, Version: "1", Resources: []lkgcache.Resource{
		{Name: "identity", Version: "1", TypeURL: lkgcache.SecretType, Body: body},
	}}})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
