package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
)

// outcome is one row of the README's "Bootstrap answers and exit codes"
// table: what the control plane (or what is in front of it) answered, and
// what `run` does about it. Every sample is checked against the row.
type outcome struct {
	answer  string
	kind    Kind
	samples []sample
}

type sample struct {
	name  string
	serve func(t *testing.T) (url string, ca []byte)
	clock timesync.Status
	msg   string // the operator's message names this
}

var (
	synced   = timesync.Status{Synced: true}
	unsynced = timesync.Status{}
	unknown  = timesync.Status{Err: errors.New("adjtimex: operation not permitted")}
)

const bootstrapTimeoutRow = "| `--bootstrap-timeout` passes (0, the default, waits forever) | stops | `1` |"

func outcomes() []outcome {
	ok := func(s string) sample { return sample{name: s, clock: synced} }
	answer := func(status int, body, msg string, header ...string) sample {
		s := ok(fmt.Sprintf("%d %.30q", status, body))
		s.msg = msg
		s.serve = func(t *testing.T) (string, []byte) {
			srv, ca := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
				for i := 0; i+1 < len(header); i += 2 {
					w.Header().Set(header[i], header[i+1])
				}
				respond(status, body)(w, nil)
			})
			return srv.URL, ca
		}
		return s
	}
	cert := func(name string, clock timesync.Status, msg string, tmpl x509.Certificate) sample {
		return sample{name: name, clock: clock, msg: msg, serve: func(t *testing.T) (string, []byte) { return certServer(t, tmpl) }}
	}
	// The control plane's certificate is valid; the CA of --ca-cert-file
	// that signed it is not.
	ca := func(name string, clock timesync.Status, msg string, validity x509.Certificate) sample {
		return sample{name: name, clock: clock, msg: msg, serve: func(t *testing.T) (string, []byte) {
			return caServer(t, validity, x509.Certificate{NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
		}}
	}
	now := time.Now()
	future := x509.Certificate{NotBefore: now.Add(time.Hour), NotAfter: now.Add(2 * time.Hour)}
	past := x509.Certificate{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}
	clientOnly := x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	const proxy = "not an answer of the Kuma control plane's DP server"
	return []outcome{
		{"`422` `mesh: mesh \"<mesh>\" does not exist`", MeshNotFound, []sample{answer(422, `mesh: mesh "payments" does not exist`, `mesh "payments" does not exist`)}},
		{"`422` `Dataplane Token is required…`", Permanent, []sample{answer(422, tokenRequiredBody, "--dataplane-token-file")}},
		{"`422` `<field>: <message>` (the Dataplane is invalid)", Permanent, []sample{
			answer(422, "networking.listeners[0].type: type must be ZoneIngress or ZoneEgress", "type must be ZoneIngress"),
			answer(422, "outbound: should be empty since dataplane is in Transparent Proxying mode", "should be empty"),
		}},
		{"`422` with any other body", Retryable, []sample{answer(422, "", "answered 422 with an empty body"), answer(422, "Unprocessable Entity", proxy)}},
		{"`400` `A data plane proxy is trying to connect … SANs …` (host not in the certificate)", Permanent, []sample{answer(400, sanMismatchBody, "example.internal")}},
		{"`400` `… not a certificate authority …` (`--ca-cert-file` is not a CA)", Permanent, []sample{answer(400, notCABody, "--ca-cert-file is not a CA")}},
		{"`400` with an empty body (the request could not be parsed)", Permanent, []sample{answer(400, "", "could not parse")}},
		{"`400` with any other body", Retryable, []sample{answer(400, "Client sent an HTTP request to an HTTPS server.\n", proxy), answer(400, "<html>Bad Request</html>", "Bad Request")}},
		{"`404` with an empty body (the Dataplane is not stored yet)", Retryable, []sample{answer(404, "", "does not know this Dataplane yet")}},
		{"`404` `404: Page Not Found` (the Kuma API server's port)", Permanent, []sample{answer(404, "404: Page Not Found", "5678")}},
		{"`404` with any other body, e.g. `404 page not found`", Retryable, []sample{answer(404, "404 page not found\n", `answered 404 "404 page not found"`)}},
		{"`401`, `403`, `407` (kuma-cp never sends them: a proxy or load balancer does)", Retryable, []sample{
			answer(401, "Unauthorized", "answered 401"), answer(403, "<html>Forbidden by policy</html>", `answered 403 "<html>Forbidden by policy</html>": `+proxy), answer(407, "", "407"),
		}},
		{"`408`, `425`, `429`, after `Retry-After` (up to 5 minutes) if sent", Retryable, []sample{
			answer(408, "", "408"), answer(425, "", "425"), answer(429, "slow down", `answered 429 "slow down"`, "Retry-After", "2"),
		}},
		{"any other `4xx`", Retryable, []sample{answer(405, "Method Not Allowed", "405"), answer(413, "", "413"), answer(451, strings.Repeat("long ", 100), "…")}},
		{"`5xx`, after `Retry-After` (up to 5 minutes) if sent", Retryable, []sample{answer(500, "", "500"), answer(503, "busy\r\nretry", `"busy  retry"`, "Retry-After", "1")}},
		{"`3xx` redirect (a proxy or load balancer: never followed, the request carries the token)", Retryable, []sample{
			answer(308, "", "does not follow redirects", "Location", "http://elsewhere.example/bootstrap"), answer(302, "", `a redirect to "/login"`, "Location", "/login")}},
		{"`200` that is not a Kuma bootstrap response", Permanent, []sample{answer(200, "<html>hi</html>", "not a Kuma bootstrap response")}},
		{"connection refused, reset or timed out", Retryable, []sample{{name: "refused", clock: synced, msg: "cannot reach", serve: func(t *testing.T) (string, []byte) {
			srv, ca := tlsServer(t, respond(200, "{}"))
			srv.Close()
			return srv.URL, ca
		}}}},
		{"certificate not signed by a trusted CA", Permanent, []sample{{name: "other CA", clock: synced, msg: "not signed by a trusted CA: set --ca-cert-file", serve: func(t *testing.T) (string, []byte) {
			srv, _ := tlsServer(t, respond(200, "{}"))
			return srv.URL, otherCA(t)
		}}}},
		{"certificate does not cover the host in `--cp-address`", Permanent, []sample{{name: "localhost", clock: synced, msg: "SANs", serve: func(t *testing.T) (string, []byte) {
			srv, ca := tlsServer(t, respond(200, "{}"))
			return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), ca // not in httptest's SANs
		}}}},
		{"certificate not valid yet", Retryable, []sample{
			cert("clock synchronised", synced, "is not valid before", future),
			cert("clock not synchronised", unsynced, "the system clock is not synchronised (NTP); the control plane's certificate is not valid before", future),
			ca("the CA of --ca-cert-file", synced, `--ca-cert-file ca.pem: its CA certificate "test CA" is not valid before`, future),
		}},
		{"certificate expired, system clock synchronised", Permanent, []sample{
			cert("expired", synced, "renew the control plane's TLS certificate", past),
			ca("the CA of --ca-cert-file", synced, `--ca-cert-file ca.pem: its CA certificate "test CA" expired at `+past.NotAfter.UTC().Format(time.RFC3339)+" (the clock says", past),
		}},
		{"certificate expired, system clock not synchronised (or adjtimex denied)", Retryable, []sample{
			cert("clock not synchronised", unsynced, "the system clock is not synchronised (NTP); the control plane's certificate expired at", past),
			cert("clock unknown", unknown, "may not be synchronised", past),
			ca("the CA of --ca-cert-file, clock not synchronised", unsynced, `the system clock is not synchronised (NTP); --ca-cert-file ca.pem: its CA certificate "test CA" expired at`, past),
		}},
		{"certificate not for a server (key usage)", Permanent, []sample{cert("client auth only", synced, "not valid for serving", clientOnly)}},
		{"not TLS (e.g. the API's plain-HTTP port 5681)", Permanent, []sample{{name: "plain HTTP", clock: synced, msg: "does not speak TLS", serve: func(t *testing.T) (string, []byte) {
			srv := httptest.NewServer(respond(200, "{}"))
			t.Cleanup(srv.Close)
			return strings.Replace(srv.URL, "http://", "https://", 1), nil
		}}}},
	}
}

func (o outcome) readmeRow() string {
	does, exit := "retries", "none (retried)"
	switch o.kind {
	case MeshNotFound:
		does = "waits for the mesh"
	case Permanent:
		does, exit = "stops", "`78`"
	}
	return fmt.Sprintf("| %s | %s | %s |", o.answer, does, exit)
}

func TestEveryBootstrapOutcome(t *testing.T) {
	for _, o := range outcomes() {
		for _, s := range o.samples {
			t.Run(o.answer+"/"+s.name, func(t *testing.T) { checkOutcome(t, o, s) })
		}
	}
}

func checkOutcome(t *testing.T, o outcome, s sample) {
	url, ca := s.serve(t)
	c, err := NewClient(url, ca)
	if err != nil {
		t.Fatal(err)
	}
	if ca != nil { // as NewClientFor sets it for --ca-cert-file ca.pem
		c.trust = trust{caFile: "ca.pem", certs: config.ParseCAFile(ca).Certs}
	}
	c.clock = func() timesync.Status { return s.clock }
	attempts := 0
	var last error
	loop := Loop{
		Backoff: backoff.Backoff{Initial: time.Second, Max: time.Second, Rand: func() float64 { return 0 }},
		Clock:   &fakeClock{now: time.Unix(0, 0)},
		Timeout: 3 * time.Second,
		Attempt: func(ctx context.Context) ([]byte, error) {
			attempts++
			_, last = c.Fetch(ctx, &Request{Mesh: "payments", Name: "zp"})
			return nil, last
		},
	}
	_, err = loop.Run(context.Background())
	if k := KindOf(last); k != o.kind {
		t.Errorf("kind %v, want %v: %v", k, o.kind, last)
	}
	if !strings.Contains(last.Error(), s.msg) {
		t.Errorf("message %q does not say %q", last, s.msg)
	}
	if strings.Contains(s.name, "--ca-cert-file") && strings.Contains(last.Error(), "the control plane's certificate expired") {
		t.Errorf("the configured CA is blamed on the control plane: %q", last)
	}
	code := exitcode.Of(ExitError(err))
	switch {
	case o.kind == Permanent && (attempts != 1 || code != exitcode.Config):
		t.Errorf("permanent: %d attempts, exit %d; want 1 attempt, exit 78", attempts, code)
	case o.kind != Permanent && (attempts < 2 || code != exitcode.Runtime):
		t.Errorf("retried: %d attempts, exit %d after --bootstrap-timeout; want more, exit 1", attempts, code)
	}
}

// The README documents the same table; a changed outcome must change it.
func TestReadmeListsEveryBootstrapOutcome(t *testing.T) {
	want := []string{}
	for _, o := range outcomes() {
		want = append(want, o.readmeRow())
	}
	want = append(want, bootstrapTimeoutRow)
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	in := false
	for _, line := range strings.Split(string(readme), "\n") {
		switch {
		case strings.HasPrefix(line, "### Bootstrap answers and exit codes"):
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| answer") && !strings.HasPrefix(line, "|---"):
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's \"Bootstrap answers and exit codes\" rows differ; they should read:\n%s\n\nthey read:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// certServer serves TLS on 127.0.0.1 with a leaf made from tmpl's validity
// and key usage, signed by a fresh CA it returns.
func certServer(t *testing.T, tmpl x509.Certificate) (string, []byte) {
	t.Helper()
	return caServer(t, x509.Certificate{NotBefore: time.Now().Add(-24 * time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}, tmpl)
}

// caServer is certServer with a CA valid as caValidity says.
func caServer(t *testing.T, caValidity, tmpl x509.Certificate) (string, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: caValidity.NotBefore, NotAfter: caValidity.NotAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := tmpl
	leaf.SerialNumber = big.NewInt(2)
	leaf.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	if leaf.ExtKeyUsage == nil {
		leaf.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, &leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(respond(200, "{}"))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
