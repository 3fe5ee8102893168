package bootstrap

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
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
)

func (k Kind) String() string {
	switch k {
	case MeshNotFound:
		return "mesh_not_found"
	case Permanent:
		return "permanent"
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

// Exact texts of the control plane (kuma-cp) this classification relies on.
const (
	meshMissingPrefix = `mesh: mesh "`
	meshMissingSuffix = `" does not exist`
	apiServer404      = "404: Page Not Found"
	tokenRequired     = "Dataplane Token is required"
)

// classifyStatus turns a non-200 answer into an Error.
func classifyStatus(status int, body, mesh, cpAddress string) *Error {
	b := strings.TrimSpace(body)
	e := &Error{Status: status, Body: b}
	switch {
	case status == 422 && strings.HasPrefix(b, meshMissingPrefix) && strings.HasSuffix(b, meshMissingSuffix):
		e.Kind = MeshNotFound
		e.Msg = fmt.Sprintf("mesh %q does not exist on the control plane yet: create it (kumactl apply or the API); zoneproxy keeps waiting", mesh)
	case status == 422 && strings.HasPrefix(b, tokenRequired):
		e.Kind = Permanent
		e.Msg = "the control plane requires a dataplane token: generate one with `kumactl generate dataplane-token --mesh " + mesh + "` and pass it with --dataplane-token-file"
	case status == 422:
		e.Kind = Permanent
		e.Msg = "the control plane rejected this zone proxy's Dataplane (422): " + b
	case status == 404 && b == "":
		e.Kind = Retryable
		e.Msg = "the control plane does not know this Dataplane yet (404)"
	case status == 404 && b == apiServer404:
		e.Kind = Permanent
		e.Msg = fmt.Sprintf("%s has no /bootstrap endpoint: this is the Kuma API server port (5681/5682); point --cp-address at the DP server port, 5678 by default", cpAddress)
	case status == 404:
		e.Kind = Permanent
		e.Msg = fmt.Sprintf("%s has no /bootstrap endpoint (404 %q): check that --cp-address is the zone control plane's DP server (port 5678 by default)", cpAddress, b)
	case status == 400 && strings.Contains(b, "SANs"):
		e.Kind = Permanent
		e.Msg = "the control plane's certificate does not cover the host in --cp-address; use a host it lists or reissue its certificate. The control plane says: " + b
	case status == 400 && b == "":
		e.Kind = Permanent
		e.Msg = "the control plane could not parse the bootstrap request (400): the agent and control plane versions may not match"
	case status >= 400 && status < 500:
		e.Kind = Permanent
		e.Msg = fmt.Sprintf("the control plane refused the bootstrap request (%d): %s", status, b)
	default:
		e.Kind = Retryable
		e.Msg = fmt.Sprintf("the control plane answered %d", status)
		if b != "" {
			e.Msg += ": " + truncate(b, 200)
		}
	}
	return e
}

// classifyTransport decides whether a failed round trip is worth retrying.
func classifyTransport(err error, cpAddress string) *Error {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		recHeader tls.RecordHeaderError
		verifyErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostErr):
		return &Error{Kind: Permanent, Err: err, Msg: fmt.Sprintf(
			"the control plane's certificate is not valid for the host in --cp-address %s (%s): use a host name or IP in its SANs", cpAddress, sanList(hostErr.Certificate))}
	case errors.As(err, &unknownCA):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate is not signed by a trusted CA: set --ca-cert-file to the control plane's CA certificate"}
	case errors.As(err, &invalid):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate is not acceptable (expired or not valid for serving): check the control plane's TLS certificate and --ca-cert-file"}
	case errors.As(err, &verifyErr):
		return &Error{Kind: Permanent, Err: err, Msg: "the control plane's certificate could not be verified: check --ca-cert-file"}
	case errors.As(err, &recHeader) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return &Error{Kind: Permanent, Err: err, Msg: fmt.Sprintf("%s does not speak TLS (is it the Kuma API's plain-HTTP port 5681?): point --cp-address at the DP server port, 5678 by default", cpAddress)}
	}
	return &Error{Kind: Retryable, Err: err, Msg: "cannot reach the control plane at " + cpAddress}
}

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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
