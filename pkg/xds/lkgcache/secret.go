package lkgcache

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

// SecretType is the type URL of SDS secrets.
const SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

// EarliestNotAfter is the earliest expiry among the certificates of the
// snapshot's SDS secrets; zero if it holds none.
func (s *Snapshot) EarliestNotAfter() (time.Time, error) {
	var earliest time.Time
	for _, t := range s.Types {
		for _, r := range t.Resources {
			if r.TypeURL != SecretType {
				continue
			}
			na, err := certificateNotAfter(r.Body)
			if err != nil {
				return time.Time{}, fmt.Errorf("secret %q: %w", r.Name, err)
			}
			if !na.IsZero() && (earliest.IsZero() || na.Before(earliest)) {
				earliest = na
			}
		}
	}
	return earliest, nil
}

// certificateNotAfter is when a Secret stops being usable: for a
// tls_certificate, the earliest NotAfter of its chain; for a trust bundle
// (validation_context), the latest of its CAs', as one valid CA still
// verifies peers while another is being rotated out. Zero for secrets that
// hold no inline certificate (files Envoy reads itself, other kinds).
func certificateNotAfter(body []byte) (time.Time, error) {
	secret := &tlsv3.Secret{}
	if err := proto.Unmarshal(body, secret); err != nil {
		return time.Time{}, err
	}
	switch s := secret.GetType().(type) {
	case *tlsv3.Secret_TlsCertificate:
		certs, err := inlineCertificates(s.TlsCertificate.GetCertificateChain())
		if err != nil || certs == nil {
			return time.Time{}, err
		}
		if len(certs) == 0 {
			return time.Time{}, errors.New("tls_certificate without a PEM certificate")
		}
		earliest := certs[0].NotAfter
		for _, c := range certs[1:] {
			if c.NotAfter.Before(earliest) {
				earliest = c.NotAfter
			}
		}
		return earliest, nil
	case *tlsv3.Secret_ValidationContext:
		certs, err := inlineCertificates(s.ValidationContext.GetTrustedCa())
		var latest time.Time
		for _, c := range certs {
			if c.NotAfter.After(latest) {
				latest = c.NotAfter
			}
		}
		return latest, err
	}
	return time.Time{}, nil
}

// inlineCertificates parses the PEM certificates of src; nil when it is
// absent or not inline (a file, an environment variable).
func inlineCertificates(src *corev3.DataSource) ([]*x509.Certificate, error) {
	var pemData []byte
	switch s := src.GetSpecifier().(type) {
	case *corev3.DataSource_InlineBytes:
		pemData = s.InlineBytes
	case *corev3.DataSource_InlineString:
		pemData = []byte(s.InlineString)
	default:
		return nil, nil
	}
	certs := []*x509.Certificate{}
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate: %w", err)
		}
		certs = append(certs, cert)
	}
}
