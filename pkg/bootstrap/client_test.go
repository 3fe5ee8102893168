package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const (
	tokenRequiredBody = "Dataplane Token is required. Generate token using 'kumactl generate dataplane-token > /path/file' and provide it via --dataplane-token-file=/path/file argument to Kuma DP"
	sanMismatchBody   = `A data plane proxy is trying to connect to the control plane using "example.internal" address, but the certificate in the control plane has the following SANs ["127.0.0.1" "::1" "vm" "localhost"]. Either change the --cp-address in kuma-dp to one of those or execute the following steps:`
)

func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
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

func TestFetchClassifiesEveryAnswer(t *testing.T) {
	okBody := `{"bootstrap":"` + base64.StdEncoding.EncodeToString([]byte("node:\n  id: payments.zp\n")) + `","kumaSidecarConfiguration":{"networking":{"address":"127.0.0.1"}}}`
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		wantKind Kind
		wantOK   bool
		wantMsg  string
	}{
		{"200 bootstrap", respond(200, okBody), 0, true, ""},
		{"422 mesh missing", respond(422, `mesh: mesh "payments" does not exist`), MeshNotFound, false, `mesh "payments" does not exist`},
		{"422 token required", respond(422, tokenRequiredBody), Permanent, false, "--dataplane-token-file"},
		{"422 validation", respond(422, "networking.listeners[0].type: type must be ZoneIngress or ZoneEgress"), Permanent, false, "type must be ZoneIngress"},
		{"400 SAN mismatch", respond(400, sanMismatchBody), Permanent, false, "example.internal"},
		{"400 empty", respond(400, ""), Permanent, false, "could not parse"},
		{"404 empty", respond(404, ""), Retryable, false, "404"},
		{"404 API server", respond(404, "404: Page Not Found"), Permanent, false, "5678"},
		{"404 other server", respond(404, "404 page not found\n"), Permanent, false, "no /bootstrap endpoint"},
		{"403", respond(403, "forbidden"), Permanent, false, "403"},
		{"500 empty", respond(500, ""), Retryable, false, "500"},
		{"503", respond(503, "busy"), Retryable, false, "503"},
		{"200 not a bootstrap", respond(200, "<html>hi</html>"), Permanent, false, "not a Kuma bootstrap response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, ca := tlsServer(t, tc.handler)
			c, err := NewClient(srv.URL, ca)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Fetch(context.Background(), &Request{Mesh: "payments", Name: "zp"})
			if tc.wantOK {
				if err != nil || !strings.Contains(string(out), "payments.zp") {
					t.Fatalf("want bootstrap, got %q, %v", out, err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			if k := KindOf(err); k != tc.wantKind {
				t.Errorf("kind = %v, want %v (%v)", k, tc.wantKind, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q does not mention %q", err, tc.wantMsg)
			}
		})
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

func TestFetchTransportErrors(t *testing.T) {
	t.Run("wrong CA is permanent and names --ca-cert-file", func(t *testing.T) {
		srv, _ := tlsServer(t, respond(200, "{}"))
		c, _ := NewClient(srv.URL, otherCA(t))
		_, err := c.Fetch(context.Background(), &Request{})
		if KindOf(err) != Permanent || !strings.Contains(err.Error(), "--ca-cert-file") {
			t.Fatalf("got %v (%v)", err, KindOf(err))
		}
	})
	t.Run("host not in SANs is permanent", func(t *testing.T) {
		srv, ca := tlsServer(t, respond(200, "{}"))
		url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) // not in httptest's SANs
		c, _ := NewClient(url, ca)
		_, err := c.Fetch(context.Background(), &Request{})
		if KindOf(err) != Permanent || !strings.Contains(err.Error(), "SANs") {
			t.Fatalf("got %v (%v)", err, KindOf(err))
		}
	})
	t.Run("plain HTTP server is permanent", func(t *testing.T) {
		srv := httptest.NewServer(respond(200, "{}"))
		defer srv.Close()
		c, _ := NewClient(strings.Replace(srv.URL, "http://", "https://", 1), nil)
		_, err := c.Fetch(context.Background(), &Request{})
		if KindOf(err) != Permanent || !strings.Contains(err.Error(), "does not speak TLS") {
			t.Fatalf("got %v (%v)", err, KindOf(err))
		}
	})
	t.Run("connection refused is retryable", func(t *testing.T) {
		srv, ca := tlsServer(t, respond(200, "{}"))
		url := srv.URL
		srv.Close()
		c, _ := NewClient(url, ca)
		_, err := c.Fetch(context.Background(), &Request{})
		if KindOf(err) != Retryable {
			t.Fatalf("got %v (%v)", err, KindOf(err))
		}
	})
	t.Run("bad CA file content", func(t *testing.T) {
		if _, err := NewClient("https://x", []byte("not pem")); err == nil {
			t.Fatal("want error")
		}
	})
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
				Backoff: Backoff{Initial: time.Second, Max: 5 * time.Second, Rand: func() float64 { return tc.rand }},
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
				Backoff: Backoff{Initial: time.Second, Max: 5 * time.Second, Rand: func() float64 { return 0 }},
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
		Backoff: Backoff{Initial: time.Hour, Max: time.Hour},
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
