package lkgcache

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// SecretType is the type URL of SDS secrets.
const SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

// Field numbers of envoy.extensions.transport_sockets.tls.v3.Secret and the
// messages below it: read by hand so the product does not link Envoy's TLS
// protos for one field.
const (
	secretTLSCertificate    = 2 // Secret.tls_certificate
	secretValidationContext = 4 // Secret.validation_context
	tlsCertificateChain     = 1 // TlsCertificate.certificate_chain
	validationTrustedCA     = 1 // CertificateValidationContext.trusted_ca
	dataSourceFilename      = 1 // DataSource.filename
	dataSourceBytes         = 2 // DataSource.inline_bytes
	dataSourceString        = 3 // DataSource.inline_string
)

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
func certificateNotAfter(secret []byte) (time.Time, error) {
	tlsCert, err := field(secret, secretTLSCertificate)
	if err != nil {
		return time.Time{}, err
	}
	if tlsCert != nil {
		certs, err := inlineCertificates(tlsCert, tlsCertificateChain)
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
	}
	vc, err := field(secret, secretValidationContext)
	if err != nil || vc == nil {
		return time.Time{}, err
	}
	certs, err := inlineCertificates(vc, validationTrustedCA)
	var latest time.Time
	for _, c := range certs {
		if c.NotAfter.After(latest) {
			latest = c.NotAfter
		}
	}
	return latest, err
}

// inlineCertificates parses the PEM certificates of msg's DataSource field
// num; nil when it is absent or a file.
func inlineCertificates(msg []byte, num protowire.Number) ([]*x509.Certificate, error) {
	src, err := field(msg, num)
	if err != nil || src == nil {
		return nil, err
	}
	if f, _ := field(src, dataSourceFilename); f != nil {
		return nil, nil
	}
	pemData, err := field(src, dataSourceBytes)
	if err == nil && pemData == nil {
		pemData, err = field(src, dataSourceString)
	}
	if err != nil || pemData == nil {
		return nil, err
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

// field returns the last length-delimited field num of a message (proto's
// last-one-wins), nil if absent.
func field(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		msg = msg[l:]
		l = protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(msg)
			out = v
		}
		msg = msg[l:]
	}
	return out, nil
}
