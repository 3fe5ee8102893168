package bootstrap

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
)

// AttemptTimeout bounds one request, as kuma-dp does.
const AttemptTimeout = 10 * time.Second

// maxBody bounds what the agent reads from the control plane.
const maxBody = 16 << 20

// Client sends one /bootstrap request at a time.
type Client struct {
	cpAddress string
	caPEM     []byte // handed to Envoy through the request, "" for the system store
	trust     trust  // names --ca-cert-file when a certificate in it is what fails
	endpoint  string
	http      *http.Client
	tr        *http.Transport
	now       func() time.Time
	clock     timesync.Checker // is the system clock synchronised?
}

// NewClient verifies the control plane with caPEM when given, else with
// the system trust store.
func NewClient(cpAddress string, caPEM []byte) (*Client, error) {
	tlsCfg, err := clientTLS(caPEM)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.Proxy = nil // the DP server is reached directly, as Envoy will reach it
	return &Client{
		cpAddress: cpAddress,
		caPEM:     caPEM,
		endpoint:  strings.TrimRight(cpAddress, "/") + "/bootstrap",
		http:      &http.Client{Transport: tr, Timeout: AttemptTimeout, CheckRedirect: refuseRedirects},
		tr:        tr,
		now:       time.Now,
		clock:     timesync.Check,
	}, nil
}

// refuseRedirects keeps the request, which carries the dataplane token,
// from following a redirect to another host or to plain HTTP: the
// redirect is the answer, and the attempt says where it pointed.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func clientTLS(caPEM []byte) (*tls.Config, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no certificate could be parsed from the CA file")
		}
		tlsCfg.RootCAs = pool
	}
	return tlsCfg, nil
}

// Close drops idle connections.
func (c *Client) Close() {
	if c == nil {
		return
	}
	c.http.CloseIdleConnections()
}

// Fetch makes one attempt and returns Envoy's bootstrap YAML, or an *Error.
func (c *Client) Fetch(ctx context.Context, req *Request) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Kind: Permanent, Msg: "cannot encode the bootstrap request", Err: err}
	}
	resp, err := c.post(ctx, body)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classifyTransport(err, c.cpAddress, c.trust, c.now(), c.clock)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &Error{Kind: Retryable, Status: resp.StatusCode, Msg: fmt.Sprintf("reading the control plane's %d answer failed", resp.StatusCode), Err: err}
	}
	if resp.StatusCode/100 == 3 {
		return nil, &Error{Kind: Retryable, Status: resp.StatusCode, Msg: fmt.Sprintf(
			"%s answered %d, a redirect to %q: zoneproxy does not follow redirects, which would take the dataplane token elsewhere; point "+config.KeyCPAddress.Flag()+" at the control plane's DP server",
			c.cpAddress, resp.StatusCode, errtext.Truncate(resp.Header.Get("Location"), 200))}
	}
	if resp.StatusCode != http.StatusOK {
		body := string(data)
		if req.DataplaneToken != "" { // a proxy may echo the request
			body = strings.ReplaceAll(body, req.DataplaneToken, "REDACTED")
		}
		e := classifyStatus(resp.StatusCode, body, req.Mesh, c.cpAddress)
		if e.Kind != Permanent {
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), c.now())
		}
		return nil, e
	}
	yaml, err := DecodeResponse(data)
	if err != nil {
		return nil, &Error{Kind: Permanent, Status: 200, Msg: "the control plane's answer is not a Kuma bootstrap response (is " + config.KeyCPAddress.Flag() + " a Kuma zone control plane?)", Err: err}
	}
	return yaml, nil
}

func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Kind: Permanent, Msg: "invalid " + config.KeyCPAddress.Flag(), Err: err}
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Content-Type", "application/json")
	return c.http.Do(hreq)
}

// retryAfter reads Retry-After, seconds or an HTTP date; 0 if absent or unusable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// DecodeResponse extracts Envoy's bootstrap from the JSON answer
// {"bootstrap": base64(YAML), "kumaSidecarConfiguration": …}.
func DecodeResponse(data []byte) ([]byte, error) {
	var r struct {
		Bootstrap *string `json:"bootstrap"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if r.Bootstrap == nil || *r.Bootstrap == "" {
		return nil, errors.New(`no "bootstrap" field`)
	}
	yaml, err := base64.StdEncoding.DecodeString(*r.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf(`"bootstrap" is not base64: %w`, err)
	}
	return yaml, nil
}

// CAPEM is what --ca-cert-file held when the client was made; nil for the
// system's roots.
func (c *Client) CAPEM() []byte { return c.caPEM }
