package lkgcache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Where a secret's certificates are, and what is said of them.
func TestCertificateNotAfter(t *testing.T) {
	notAfter := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	pemCert := testutil.CertPEM(t, notAfter)
	secret := func(s *tlsv3.Secret) []byte {
		b, err := proto.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	chain := func(src *corev3.DataSource) []byte {
		return secret(&tlsv3.Secret{Name: "id", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{CertificateChain: src}}})
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string // the time, "zero", or "error: <part of it>"
	}{
		{"inline bytes", chain(&corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pemCert}}), "2030-06-01T12:00:00Z"},
		{"inline string", chain(&corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(pemCert)}}), "2030-06-01T12:00:00Z"},
		{"a file Envoy reads", chain(&corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/cert.pem"}}), "zero"},
		{"an environment variable", chain(&corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "CERT"}}), "zero"},
		{"no chain", chain(nil), "zero"},
		{"no PEM in the chain", chain(&corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("key")}}), "error: tls_certificate without a PEM certificate"},
		{"a generic secret", secret(&tlsv3.Secret{Name: "g", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{}}}), "zero"},
		{"not a Secret", []byte{0x0a, 0x05, 'x'}, "error: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			na, err := certificateNotAfter(tc.body)
			got := na.UTC().Format(time.RFC3339)
			switch {
			case err != nil:
				got = "error: " + err.Error()
			case na.IsZero():
				got = "zero"
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}

// BenchmarkEarliestNotAfter judges a snapshot as the relay's cache does
// before serving it: a proxy's identity certificate and its mesh's CA
// bundle among 1000 listeners.
func BenchmarkEarliestNotAfter(b *testing.B) {
	now := time.Now()
	s := &Snapshot{Types: []TypeState{
		{TypeURL: SecretType, Resources: []Resource{
			tlsSecret(b, "identity_cert:secret:default", append(testutil.CertPEM(b, now.Add(24*time.Hour)), testutil.CertPEM(b, now.Add(48*time.Hour))...)),
			trustBundlePEM(b, "mesh_ca:secret:default", testutil.CertPEM(b, now.Add(time.Hour)), testutil.CertPEM(b, now.Add(2*time.Hour))),
		}},
	}}
	listeners := TypeState{TypeURL: listenerType}
	for i := range 1000 {
		listeners.Resources = append(listeners.Resources, Resource{Name: fmt.Sprint("l", i), TypeURL: listenerType, Body: make([]byte, 1000)})
	}
	s.Types = append(s.Types, listeners)
	b.ReportAllocs()
	for b.Loop() {
		if na, err := s.EarliestNotAfter(); err != nil || na.IsZero() {
			b.Fatal(na, err)
		}
	}
}
