package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// MaxCAFileSize bounds what is read of --ca-cert-file: a CA certificate is
// a few KiB, a whole system bundle a few hundred.
const MaxCAFileSize = 4 << 20

// CAFile is what a --ca-cert-file holds.
type CAFile struct {
	PEM   []byte
	Certs []*x509.Certificate // those that parse
	Keys  int                 // private keys, which do not belong there
}

// ReadCAFile reads and parses a CA file: a regular file of at most
// MaxCAFileSize bytes (a pipe or a device is refused unread, as a token
// file is).
func ReadCAFile(path string) (CAFile, error) {
	b, _, err := token.ReadRegular(path, MaxCAFileSize)
	if err != nil {
		return CAFile{}, err
	}
	return ParseCAFile(b), nil
}

// ParseCAFile finds the parseable certificates and the private keys of a
// PEM file.
func ParseCAFile(b []byte) CAFile {
	f := CAFile{PEM: b}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return f
		}
		switch {
		case blk.Type == "CERTIFICATE":
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				f.Certs = append(f.Certs, c)
			}
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			f.Keys++
		}
	}
}

// CATimeError says that a CA certificate of --ca-cert-file is not valid
// at the time the local clock gives (which may itself be wrong).
type CATimeError struct {
	Cert        *x509.Certificate
	NotYetValid bool // else expired
	Now         time.Time
}

func (e *CATimeError) Error() string {
	if e.NotYetValid {
		return fmt.Sprintf("its CA certificate %s is not valid before %s (the clock says %s)", CertName(e.Cert), stamp(e.Cert.NotBefore), stamp(e.Now))
	}
	return fmt.Sprintf("its CA certificate %s expired at %s (the clock says %s)", CertName(e.Cert), stamp(e.Cert.NotAfter), stamp(e.Now))
}

// CertTime returns a *CATimeError when c is not valid at now, else nil.
func CertTime(c *x509.Certificate, now time.Time) *CATimeError {
	switch {
	case now.Before(c.NotBefore):
		return &CATimeError{Cert: c, NotYetValid: true, Now: now}
	case now.After(c.NotAfter):
		return &CATimeError{Cert: c, Now: now}
	}
	return nil
}

// Time returns a *CATimeError when no certificate of f is valid at now
// (then the control plane cannot be verified with it): about the one that
// becomes valid first if some will, else the one that expired last. Nil
// when one is valid, or when f holds none.
func (f CAFile) Time(now time.Time) *CATimeError {
	var best *CATimeError
	for _, c := range f.Certs {
		te := CertTime(c, now)
		switch {
		case te == nil:
			return nil
		case best == nil,
			te.NotYetValid && (!best.NotYetValid || c.NotBefore.Before(best.Cert.NotBefore)),
			!te.NotYetValid && !best.NotYetValid && c.NotAfter.After(best.Cert.NotAfter):
			best = te
		}
	}
	return best
}

// CertName names a certificate for a message: its quoted common name,
// else its subject, else its serial number.
func CertName(c *x509.Certificate) string {
	switch {
	case c.Subject.CommonName != "":
		return strconv.Quote(errtext.Value(c.Subject.CommonName))
	case len(c.Subject.String()) > 0:
		return strconv.Quote(errtext.Value(c.Subject.String()))
	}
	return "with serial " + c.SerialNumber.String()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
