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
	secretTLSCertificate = 2 // Secret.tls_certificate
	tlsCertificateChain  = 1 // TlsCertificate.certificate_chain
	dataSourceFilename   = 1 // DataSource.filename
	dataSourceBytes      = 2 // DataSource.inline_bytes
	dataSourceString     = 3 // DataSource.inline_string
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

// certificateNotAfter reads a Secret's tls_certificate chain and returns
// its earliest NotAfter; zero for secrets without an inline certificate
// (validation contexts, files Envoy reads itself).
func certificateNotAfter(secret []byte) (time.Time, error) {
	tlsCert, err := field(secret, secretTLSCertificate)
	if err != nil || tlsCert == nil {
		return time.Time{}, err
	}
	chain, err := field(tlsCert, tlsCertificateChain)
	if err != nil || chain == nil {
		return time.Time{}, err
	}
	if f, _ := field(chain, dataSourceFilename); f != nil {
		return time.Time{}, nil
	}
	pemData, err := field(chain, dataSourceBytes)
	if err == nil && pemData == nil {
		pemData, err = field(chain, dataSourceString)
	}
	if err != nil || pemData == nil {
		return time.Time{}, err
	}
	var earliest time.Time
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("certificate: %w", err)
		}
		if earliest.IsZero() || cert.NotAfter.Before(earliest) {
			earliest = cert.NotAfter
		}
	}
	if earliest.IsZero() {
		return time.Time{}, errors.New("tls_certificate without a PEM certificate")
	}
	return earliest, nil
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
