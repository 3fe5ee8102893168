package bootstrap

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
)

// Kind classifies one failed attempt.
type Kind int

const (
	// Retryable: the control plane is unreachable or busy; try again.
	Retryable Kind = iota
	// MeshNotFound: the mesh does not exist yet; wait for it.
	MeshNotFound
	// Permanent: retrying cannot help; exit 78 with the message.
	Permanent
	// Local: the agent could not make the request (its token file is
	// being rotated, say); nothing was asked of the control plane, so
	// this says nothing of it: retried, but never taken for the control
	// plane being unreachable.
	Local
)

func (k Kind) String() string {
	switch k {
	case MeshNotFound:
		return "mesh_not_found"
	case Permanent:
		return "permanent"
	case Local:
		return "local"
	}
	return "retryable"
}

// Error is a classified failure of one /bootstrap attempt. Its text is the
// operator's: what happened and what to do.
type Error struct {
	Kind   Kind
	Status int    // HTTP status, 0 for transport errors
	Body   string // control plane's answer, trimmed
	Msg    string
	Err    error
	// RetryAfter is the server's Retry-After, 0 when it sent none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a classified error; unclassified errors are retryable.
func KindOf(err error) Kind {
	var be *Error
	if errors.As(err, &be) {
		return be.Kind
	}
	return Retryable
}

// Exact texts of kuma-cp this classification relies on. The bootstrap
// handler never answers 401, 403, 407, 408, 425 or 429, so those always come
// from something in front of it and are retried like any unknown answer:
// only kuma-cp's own refusals are final.
const (
	meshMissingPrefix = `mesh: mesh "`
	meshMissingSuffix = `" does not exist`
	tokenRequired     = "Dataplane Token is required"
	sanMismatch       = "A data plane proxy is trying to connect to the control plane using "
	caNotCA           = "A data plane proxy is trying to verify the control plane using the certificate which is not a certificate authority"
	apiServer404      = "404: Page Not Found" // go-restful, the API server port
)

// validationBody is kuma's ValidationError: "<field>: <message>" joined by "; ".
var validationBody = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.\[\]"-]*: \S`)

// classifyStatus turns a non-200 answer into an Error.
func classifyStatus(status int, body, mesh, cpAddress string) *Error {
	b := strings.TrimSpace(body)
	e := &Error{Status: status, Body: b, Kind: Permanent}
	switch {
	case status == 422 && strings.HasPrefix(b, meshMissingPrefix) && strings.HasSuffix(b, meshMissingSuffix):
		e.Kind = MeshNotFound
		e.Msg = fmt.Sprintf("mesh %q does not exist on the control plane yet: create it (kumactl apply or the API); zoneproxy keeps waiting", mesh)
	case status == 422 && strings.HasPrefix(b, tokenRequired):
		e.Msg = "the control plane requires a dataplane token: generate one with `kumactl generate dataplane-token --mesh " + mesh + "` and pass it with " + config.KeyDataplaneTokenFile.Flag()
	case status == 422 && validationBody.MatchString(b):
		e.Msg = "the control plane rejected this zone proxy's Dataplane (422): " + b
	case status == 400 && strings.HasPrefix(b, sanMismatch):
		e.Msg = "the control plane's certificate does not cover the host in " + config.KeyCPAddress.Flag() + "; use a host it lists or reissue its certificate. The control plane says: " + b
	case status == 400 && strings.HasPrefix(b, caNotCA):
		e.Msg = config.KeyCACertFile.Flag() + " is not a CA certificate (basic constraint CA:false): give the CA that signed the control plane's certificate"
	case status == 400 && b == "":
		e.Msg = "the control plane could not parse the bootstrap request (400): the agent and control plane versions may not match"
	case status == 404 && b == apiServer404:
		e.Msg = fmt.Sprintf("%s has no /bootstrap endpoint: this is the Kuma API server port (5681/5682); point %s at the DP server port, 5678 by default", cpAddress, config.KeyCPAddress.Flag())
	case status == 404 && b == "":
		e.Kind = Retryable
		e.Msg = "the control plane does not know this Dataplane yet (404)"
	default:
		e.Kind = Retryable
		e.Msg = fmt.Sprintf("%s answered %d%s", cpAddress, status, quoteBody(b))
		if status >= 400 && status < 500 {
			e.Msg += ": not an answer of the Kuma control plane's DP server (a proxy or load balancer in front of it?)"
		}
	}
	return e
}

// quoteBody shows an unknown answer's start on one line.
func quoteBody(b string) string {
	if b == "" {
		return " with an empty body"
	}
	b = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, b)
	return fmt.Sprintf(" %q", errtext.Truncate(b, 200))
}

// trust is what verifies the control plane: --ca-cert-file's path and
// certificates, or none for the system trust store.
type trust struct {
	caFile string
	certs  []*x509.Certificate
}

// inCAFile: c is one of --ca-cert-file's certificates.
func (tr trust) inCAFile(c *x509.Certificate) bool {
	if c == nil {
		return false
	}
	for _, ca := range tr.certs {
		if ca.Equal(c) {
			return true
		}
	}
	return false
}

// classifyTransport decides whether a failed round trip is worth retrying.
// clock is asked only when a certificate looks expired.
func classifyTransport(err error, cpAddress string, tr trust, now time.Time, clock timesync.Checker) *Error {
	var (
		unknownCA x509.UnknownAuthorityError // a value, as crypto/x509 returns it
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		recHeader tls.RecordHeaderError
		verifyErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostErr):
		return &Error{Kind: Permanent, Err: err, Msg: fmt.Sprintf(
			"the control plane's certificate is not valid for the host in %s %s (%s): use a host name or IP in its SANs", config.KeyCPAddress.Flag(), cpAddress, sanList(hostErr.Certificate))}
	case errors.As(err, &unknownCA):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate is not signed by a trusted CA: set " + config.KeyCACertFile.Flag() + " to the control plane's CA certificate"}
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired && tr.inCAFile(invalid.Cert):
		// Go checks the validity of the root it chains to: this is the
		// configured CA certificate's, not the control plane's.
		return caTime(err, tr.caFile, invalid.Cert, now, clock)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return certTime(err, invalid.Cert, now, clock)
	case errors.As(err, &invalid):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate is not acceptable (not valid for serving): check the control plane's TLS certificate and " + config.KeyCACertFile.Flag()}
	case errors.As(err, &verifyErr):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate could not be verified: check " + config.KeyCACertFile.Flag()}
	case errors.As(err, &recHeader) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return &Error{Kind: Permanent, Err: err, Msg: fmt.Sprintf("%s does not speak TLS (is it the Kuma API's plain-HTTP port 5681?): point %s at the DP server port, 5678 by default", cpAddress, config.KeyCPAddress.Flag())}
	}
	return &Error{Kind: Retryable, Err: err, Msg: "cannot reach the control plane at " + cpAddress}
}

// certTime: a certificate not valid yet becomes valid with time; an
// expired one is final only if this host's clock can be trusted.
func certTime(err error, cert *x509.Certificate, now time.Time, clock timesync.Checker) *Error {
	if cert != nil && now.Before(cert.NotBefore) {
		msg := fmt.Sprintf("the control plane's certificate is not valid before %s and the clock says %s", stamp(cert.NotBefore), stamp(now))
		if p := clock().Problem(); p != "" {
			msg = p + "; " + msg
		}
		return &Error{Kind: Retryable, Err: err, Msg: msg + ": zoneproxy retries until it is"}
	}
	expired := "the control plane's certificate has expired"
	if cert != nil {
		expired = fmt.Sprintf("the control plane's certificate expired at %s (the clock says %s)", stamp(cert.NotAfter), stamp(now))
	}
	if p := clock().Problem(); p != "" {
		return &Error{Kind: Retryable, Err: err, Msg: p + "; " + expired + ": zoneproxy retries until the clock is right"}
	}
	return &Error{Kind: Permanent, Err: err, Msg: expired + ": renew the control plane's TLS certificate"}
}

// caTime: the CA certificate of --ca-cert-file is not valid at now. Not
// valid yet, it becomes valid with time; expired, the file must be
// replaced (exit 78), unless this host's clock may be what is wrong.
func caTime(err error, path string, ca *x509.Certificate, now time.Time, clock timesync.Checker) *Error {
	te := config.CertTime(ca, now)
	if te == nil { // expired by Go's clock, not quite by ours
		te = &config.CATimeError{Cert: ca, Now: now}
	}
	msg := fmt.Sprintf("%s %s: %v", config.KeyCACertFile.Flag(), errtext.Value(path), te)
	p := clock().Problem()
	switch {
	case te.NotYetValid && p != "":
		return &Error{Kind: Retryable, Err: err, Msg: p + "; " + msg + ": zoneproxy retries until it is valid"}
	case te.NotYetValid:
		return &Error{Kind: Retryable, Err: err, Msg: msg + ": zoneproxy retries until it is valid"}
	case p != "":
		return &Error{Kind: Retryable, Err: err, Msg: p + "; " + msg + ": zoneproxy retries until the clock is right"}
	}
	return &Error{Kind: Permanent, Err: err, Msg: msg + ": the control plane's certificate cannot be verified with it; give the control plane's current CA certificate (the control plane's own certificate is not what expired)"}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func sanList(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	var sans []string
	sans = append(sans, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		sans = append(sans, ip.String())
	}
	return "it lists " + strings.Join(sans, ", ")
}
