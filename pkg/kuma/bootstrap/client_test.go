package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
)

const (
	tokenRequiredBody = "Dataplane Token is required. Generate token using 'kumactl generate dataplane-token > /path/file' and provide it via --dataplane-token-file=/path/file argument to Kuma DP"
	notCABody         = "A data plane proxy is trying to verify the control plane using the certificate which is not a certificate authority (basic constraint 'CA' is set to 'false').\nProvide CA that was used to sign a certificate used in the control plane by using 'kuma-dp run --ca-cert-file=file' or via KUMA_CONTROL_PLANE_CA_CERT_FILE"
	sanMismatchBody   = `A data plane proxy is trying to connect to the control plane using "example.internal" address, but the certificate in the control plane has the following SANs ["127.0.0.1" "::1" "vm" "localhost"]. Either change the --cp-address in kuma-dp to one of those or execute the following steps:`
)

func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are what some tests want
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, ca
}

func respond(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestFetchSendsTheContractFields(t *testing.T) {
	var got map[string]any
	var header http.Header
	srv, ca := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		if r.Method != http.MethodPost || r.URL.Path != "/bootstrap" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		respond(422, `mesh: mesh "payments" does not exist`)(w, r)
	})
	c, _ := NewClient(srv.URL+"/", ca)
	_, _ = c.Fetch(context.Background(), &Request{
		Mesh: "payments", Name: "zp", ProxyType: "dataplane", DataplaneToken: "tok", DataplaneTokenPath: "/t",
		DataplaneResource: `{"type":"Dataplane"}`, ReadinessPort: 9902, Workdir: "/run/zp",
		Features: []string{FeatureReusePort}, DynamicMetadata: map[string]string{},
	})
	if header.Get("Accept") != "application/json" || header.Get("Content-Type") != "application/json" {
		t.Errorf("headers: %v", header)
	}
	for key, want := range map[string]any{
		"mesh": "payments", "name": "zp", "proxyType": "dataplane", "dataplaneToken": "tok",
		"dataplaneTokenPath": "/t", "dataplaneResource": `{"type":"Dataplane"}`, "readinessPort": 9902.0,
		"workdir": "/run/zp", "caCert": "",
	} {
		if got[key] != want {
			t.Errorf("%s = %#v, want %#v", key, got[key], want)
		}
	}
	if _, ok := got["version"].(map[string]any)["envoy"]; !ok {
		t.Errorf("no version.envoy in %v", got)
	}
}

func TestNewClientRefusesABadCAFile(t *testing.T) {
	if _, err := NewClient("https://x", []byte("not pem")); err == nil {
		t.Fatal("want error")
	}
}

// otherCA is a CA that signed nothing the test servers present.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

type fakeClock struct {
	now    time.Time
	delays []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.delays = append(c.delays, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func TestLoopBackoffSchedule(t *testing.T) {
	cases := []struct {
		name string
		rand float64
		want []time.Duration
	}{
		{"no jitter drawn", 0, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		// Growing: (¼d, d]; at the maximum: (¾max, max].
		{"half the jitter drawn", 0.5, []time.Duration{625 * time.Millisecond, 1250 * time.Millisecond, 2500 * time.Millisecond, 4375 * time.Millisecond, 4375 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(0, 0)}
			attempts := 0
			var waits []Wait
			loop := Loop{
				Backoff: backoff.Backoff{Initial: time.Second, Max: 5 * time.Second, Rand: func() float64 { return tc.rand }},
				Clock:   clock,
				Attempt: func(context.Context) ([]byte, error) {
					attempts++
					if attempts <= len(tc.want) {
						return nil, &Error{Kind: MeshNotFound, Msg: "mesh missing"}
					}
					return []byte("ok"), nil
				},
				OnWait: func(w Wait) { waits = append(waits, w) },
			}
			out, err := loop.Run(context.Background())
			if err != nil || string(out) != "ok" {
				t.Fatalf("got %q, %v", out, err)
			}
			if len(clock.delays) != len(tc.want) {
				t.Fatalf("delays %v, want %v", clock.delays, tc.want)
			}
			for i := range tc.want {
				if clock.delays[i] != tc.want[i] || waits[i].Next != tc.want[i] || waits[i].Attempt != i+1 {
					t.Errorf("wait %d: delay %v (logged %v, attempt %d), want %v", i, clock.delays[i], waits[i].Next, waits[i].Attempt, tc.want[i])
				}
			}
		})
	}
}

func TestLoopOutcomes(t *testing.T) {
	perm := &Error{Kind: Permanent, Msg: "bad token"}
	cases := []struct {
		name    string
		errs    []error
		timeout time.Duration
		check   func(t *testing.T, calls int, err error)
	}{
		{"permanent stops at once", []error{perm}, 0, func(t *testing.T, calls int, err error) {
			if calls != 1 || !errors.Is(err, perm) {
				t.Fatalf("calls %d err %v", calls, err)
			}
		}},
		{"retryable then permanent", []error{&Error{Kind: Retryable, Msg: "refused"}, perm}, 0, func(t *testing.T, calls int, err error) {
			if calls != 2 || !errors.Is(err, perm) {
				t.Fatalf("calls %d err %v", calls, err)
			}
		}},
		{"timeout names the last error", nil, 10 * time.Second, func(t *testing.T, calls int, err error) {
			var te *TimeoutError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), "mesh missing") || !strings.Contains(err.Error(), "--bootstrap-timeout") {
				t.Fatalf("err %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			loop := Loop{
				Backoff: backoff.Backoff{Initial: time.Second, Max: 5 * time.Second, Rand: func() float64 { return 0 }},
				Clock:   &fakeClock{now: time.Unix(0, 0)},
				Timeout: tc.timeout,
				Attempt: func(context.Context) ([]byte, error) {
					calls++
					if calls <= len(tc.errs) {
						return nil, tc.errs[calls-1]
					}
					return nil, &Error{Kind: MeshNotFound, Msg: "mesh missing"}
				},
			}
			_, err := loop.Run(context.Background())
			tc.check(t, calls, err)
		})
	}
}

func TestLoopStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	loop := Loop{
		Backoff: backoff.Backoff{Initial: time.Hour, Max: time.Hour},
		Attempt: func(context.Context) ([]byte, error) {
			cancel()
			return nil, &Error{Kind: MeshNotFound}
		},
	}
	if _, err := loop.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"bootstrap":"bm9kZToge30K","kumaSidecarConfiguration":{}}`))
	f.Add([]byte(`{"bootstrap":""}`))
	f.Add([]byte(`{"bootstrap":"%%%"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := DecodeResponse(data)
		if err == nil && len(out) == 0 {
			t.Fatal("success without a bootstrap")
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Fri, 01 May 2026 12:00:30 GMT", 30 * time.Second},
	}
	for _, tc := range cases {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("Retry-After %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestFetchReadsRetryAfterOfRetriedAnswers(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   time.Duration
	}{
		{429, "slow down", 7 * time.Second},
		{503, "", 7 * time.Second},
		{404, "404: Page Not Found", 0}, // final: nothing to wait for
	}
	for _, tc := range cases {
		srv, ca := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			respond(tc.status, tc.body)(w, r)
		})
		c, _ := NewClient(srv.URL, ca)
		_, err := c.Fetch(context.Background(), &Request{})
		var be *Error
		if !errors.As(err, &be) || be.RetryAfter != tc.want {
			t.Errorf("%d: %v, RetryAfter want %v", tc.status, err, tc.want)
		}
	}
}

func TestLoopWaitsForRetryAfter(t *testing.T) {
	cases := []struct {
		name       string
		retryAfter time.Duration
		timeout    time.Duration
		want       time.Duration
	}{
		{"longer than the backoff", 3 * time.Second, 0, 3 * time.Second},
		{"shorter than the backoff", 100 * time.Millisecond, 0, time.Second},
		{"capped", 2 * time.Hour, 0, MaxRetryAfter},
		{"not beyond --bootstrap-timeout", time.Minute, 10 * time.Second, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(0, 0)}
			var waits []Wait
			calls := 0
			loop := Loop{
				Backoff: backoff.Backoff{Initial: time.Second, Max: time.Second, Rand: func() float64 { return 0 }},
				Clock:   clock,
				Timeout: tc.timeout,
				Attempt: func(context.Context) ([]byte, error) {
					if calls++; calls == 1 {
						return nil, &Error{Kind: Retryable, Status: 429, RetryAfter: tc.retryAfter}
					}
					return []byte("ok"), nil
				},
				OnWait: func(w Wait) { waits = append(waits, w) },
			}
			if _, err := loop.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(clock.delays) != 1 || clock.delays[0] != tc.want || waits[0].Next != tc.want {
				t.Fatalf("waited %v (logged %v), want %v", clock.delays, waits, tc.want)
			}
		})
	}
}
