package controlplane

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestTextLengthsMatchKuma(t *testing.T) {
	if got := len(dpTokenRequiredText); got != 170 {
		t.Errorf("token required text is %d bytes, kuma-cp sends 170", got)
	}
	// The live reference: host example.internal against a cert with these SANs gave 752 bytes.
	if got := len(sanMismatchText("example.internal", `["127.0.0.1" "::1" "vm" "localhost"]`)); got != 752 {
		t.Errorf("SAN mismatch text is %d bytes, kuma-cp sent 752", got)
	}
	if got := len(`mesh: mesh "payments" does not exist`); got != 36 {
		t.Fatalf("sanity: %d", got)
	}
}

func TestBootstrapStatusTable(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	serverPEM, err := os.ReadFile(s.opts.Dir + "/" + serverCertFileName)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(s.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	egress := dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener)
	ghost := dpJSON(t, "billing", "zp-egress-1", "zp-egress", egressListener)
	const text = "text/plain; charset=utf-8"
	const tok = "not-a-real-token"

	type row struct {
		name    string
		method  string
		path    string
		host    string
		raw     string // body as is, instead of the JSON request
		mutate  func(m map[string]any)
		accept  string
		status  int
		body    *string // exact body; nil = don't compare
		ctype   string  // exact content type; "" = don't compare
		h1      bool
		checkFn func(t *testing.T, r response)
	}
	str := func(s string) *string { return &s }
	empty := str("")
	withResource := func(res string) func(m map[string]any) {
		return func(m map[string]any) { m["dataplaneResource"] = res }
	}
	rows := []row{
		{name: "wrong path", path: "/bootstrap/", status: 404, body: str("404 page not found\n")},
		{name: "root path", path: "/", status: 404, body: str("404 page not found\n")},
		{name: "not JSON", raw: "nope", status: 400, body: empty},
		{name: "JSON type mismatch", raw: `{"mesh": 5}`, status: 400, body: empty},
		{name: "no token, mesh missing: token error first", mutate: func(m map[string]any) {
			delete(m, "dataplaneToken")
			delete(m, "dataplaneTokenPath")
			m["dataplaneResource"] = ghost
		}, status: 422, body: str(dpTokenRequiredText), ctype: text},
		{name: "no token, bad host: token error first", host: "example.internal", mutate: func(m map[string]any) {
			delete(m, "dataplaneToken")
			delete(m, "dataplaneTokenPath")
		}, status: 422, body: str(dpTokenRequiredText), ctype: text},
		{name: "token path only passes the presence check", mutate: func(m map[string]any) {
			delete(m, "dataplaneToken")
		}, status: 200},
		{name: "SAN mismatch", host: "example.internal", status: 400, ctype: text,
			body: str(sanMismatchText("example.internal", `["127.0.0.1" "::1" "localhost"]`))},
		{name: "SAN mismatch with port", host: "example.internal:5678", status: 400, ctype: text,
			body: str(sanMismatchText("example.internal", `["127.0.0.1" "::1" "localhost"]`))},
		{name: "localhost host is in SANs", host: "localhost", status: 200},
		{name: "legacy proxy type ingress", mutate: func(m map[string]any) { m["proxyType"] = "ingress" }, status: 500, body: empty},
		{name: "legacy proxy type without token skips token check", mutate: func(m map[string]any) {
			m["proxyType"] = "egress"
			delete(m, "dataplaneToken")
			delete(m, "dataplaneTokenPath")
		}, status: 500, body: empty},
		{name: "empty proxy type defaults to dataplane", mutate: func(m map[string]any) { m["proxyType"] = "" }, status: 200},
		{name: "no dataplaneResource: not in store", mutate: func(m map[string]any) { delete(m, "dataplaneResource") }, status: 404, body: empty},
		{name: "no dataplaneResource, mesh missing", mutate: func(m map[string]any) {
			delete(m, "dataplaneResource")
			m["mesh"] = "ghost"
		}, status: 404, body: empty},
		{name: "unknown listener type Egress", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":"127.0.0.1","listeners":[{"type":"Egress","address":"127.0.0.1","port":10002}]}}`), status: 500, body: empty},
		{name: "not a Dataplane", mutate: withResource(`{"type":"Mesh","name":"payments"}`), status: 500, body: empty},
		{name: "unknown resource type", mutate: withResource(`{"type":"Nope","mesh":"payments","name":"zp"}`), status: 500, body: empty},
		{name: "no type", mutate: withResource(`{"mesh":"payments","name":"zp","networking":{"address":"127.0.0.1"}}`), status: 500, body: empty},
		{name: "bad field type (port)", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":"abc"}]}}`), status: 500, body: empty},
		{name: "bad field type (address)", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":5}}`), status: 500, body: empty},
		{name: "bad meta type (labels)", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","labels":{"a":1},"networking":{"address":"127.0.0.1"}}`), status: 500, body: empty},
		{name: "not YAML", mutate: withResource("{{{ nope"), status: 500, body: empty},
		{name: "numeric string port is accepted (protojson)", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":"10002"}]}}`), status: 200},
		{name: "YAML resource", mutate: withResource("type: Dataplane\nmesh: payments\nname: zp-y\nlabels:\n  kuma.io/workload: zp\nnetworking:\n  address: 127.0.0.1\n  listeners:\n  - type: ZoneIngress\n    address: 127.0.0.1\n    port: 10001\n"), status: 200},
		{name: "listener without type", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":"127.0.0.1","listeners":[{"address":"127.0.0.1","port":10001}]}}`),
			status: 422, ctype: text, body: str("networking.listeners[0].type: type must be ZoneIngress or ZoneEgress")},
		{name: "no addresses", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"listeners":[{"type":"ZoneIngress","port":10001}]}}`),
			status: 422, ctype: text, body: str("networking.address: address can't be empty; networking.listeners[0].address: address can't be empty")},
		{name: "validation error beats missing mesh", mutate: withResource(`{"type":"Dataplane","mesh":"billing","name":"zp","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneIngress","address":"0.0.0.0","port":0}]}}`),
			status: 422, ctype: text, body: str("networking.listeners[0].address: must not be 0.0.0.0 or ::; networking.listeners[0].port: port must be in the range [1, 65535]")},
		{name: "no networking", mutate: withResource(`{"type":"Dataplane","mesh":"payments","name":"zp"}`),
			status: 422, ctype: text, body: str("networking: must be defined")},
		{name: "mesh missing", mutate: withResource(ghost), status: 422, ctype: text, body: str(`mesh: mesh "billing" does not exist`)},
		{name: "mesh missing beats bad caCert", mutate: func(m map[string]any) {
			m["dataplaneResource"] = ghost
			m["caCert"] = "garbage"
		}, status: 422, body: str(`mesh: mesh "billing" does not exist`)},
		{name: "caCert not PEM", mutate: func(m map[string]any) { m["caCert"] = "garbage" }, status: 500, body: empty},
		{name: "caCert PEM but not a certificate", mutate: func(m map[string]any) {
			m["caCert"] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}, status: 500, body: empty},
		{name: "caCert is not a CA", mutate: func(m map[string]any) { m["caCert"] = string(serverPEM) }, status: 400, ctype: text, body: str(notCAText)},
		{name: "caCert is the CA", mutate: func(m map[string]any) { m["caCert"] = string(caPEM) }, status: 200},
		{name: "success JSON", status: 200, ctype: "application/json", checkFn: func(t *testing.T, r response) {
			var resp struct {
				Bootstrap                string          `json:"bootstrap"`
				KumaSidecarConfiguration json.RawMessage `json:"kumaSidecarConfiguration"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil {
				t.Fatal(err)
			}
			if _, err := base64.StdEncoding.DecodeString(resp.Bootstrap); err != nil {
				t.Errorf("bootstrap is not std base64: %v", err)
			}
			if got, want := string(resp.KumaSidecarConfiguration), `{"networking":{"address":"127.0.0.1"},"metrics":{"aggregate":null}}`; got != want {
				t.Errorf("kumaSidecarConfiguration = %s, want %s", got, want)
			}
			if !bytes.HasPrefix(r.body, []byte(`{"bootstrap":"`)) {
				t.Errorf("body starts %q", r.body[:20])
			}
		}},
		{name: "success over HTTP/1.1", h1: true, status: 200, ctype: "application/json"},
		{name: "GET works too (method not checked)", method: http.MethodGet, status: 200},
		{name: "keys are case-insensitive", raw: strings.Replace(strings.Replace(string(mustJSON(t, bootstrapBody("payments", "zp-egress-1", tok, egress))), `"mesh"`, `"MESH"`, 1), `"dataplaneResource"`, `"DataplaneResource"`, 1), status: 200},
		{name: "unknown keys are ignored", mutate: func(m map[string]any) { m["somethingNew"] = []int{1} }, status: 200},
		{name: "no Accept: raw YAML", accept: "-", status: 200, ctype: "text/x-yaml", checkFn: func(t *testing.T, r response) {
			if !bytes.Contains(r.body, []byte("dynamicResources:")) {
				t.Errorf("not YAML bootstrap: %.100s", r.body)
			}
		}},
		{name: "Accept not exactly application/json: raw YAML", accept: "application/json, text/plain", status: 200, ctype: "text/x-yaml"},
	}

	h2 := httpClient(t, s, true)
	h1 := httpClient(t, s, false)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body := []byte(r.raw)
			if r.raw == "" {
				m := bootstrapBody("payments", "zp-egress-1", tok, egress)
				if r.mutate != nil {
					r.mutate(m)
				}
				body = mustJSON(t, m)
			}
			method := r.method
			if method == "" {
				method = http.MethodPost
			}
			path := r.path
			if path == "" {
				path = "/bootstrap"
			}
			req, err := http.NewRequest(method, s.URL()+path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			switch r.accept {
			case "":
				req.Header.Set("Accept", "application/json")
			case "-":
			default:
				req.Header.Set("Accept", r.accept)
			}
			if r.host != "" {
				req.Host = r.host
			}
			c := h2
			if r.h1 {
				c = h1
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if r.h1 && resp.ProtoMajor != 1 || !r.h1 && resp.ProtoMajor != 2 {
				t.Errorf("protocol %s", resp.Proto)
			}
			if resp.StatusCode != r.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, r.status, got)
			}
			if r.body != nil && string(got) != *r.body {
				t.Errorf("body %q (%d bytes), want %q (%d bytes)", got, len(got), *r.body, len(*r.body))
			}
			if r.ctype != "" && resp.Header.Get("Content-Type") != r.ctype {
				t.Errorf("content-type %q, want %q", resp.Header.Get("Content-Type"), r.ctype)
			}
			if r.body != nil && *r.body == "" && resp.Header.Get("Content-Length") != "0" {
				t.Errorf("content-length %q, want 0", resp.Header.Get("Content-Length"))
			}
			if r.checkFn != nil {
				r.checkFn(t, response{resp.StatusCode, resp.Header, got})
			}
		})
	}

	recs := s.BootstrapRequests()
	if len(recs) < len(rows)-2 { // the two 404 path rows never reach /bootstrap
		t.Errorf("recorded %d requests for %d rows", len(recs), len(rows))
	}
}

func TestBootstrapAuthDisabled(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, AuthDisabled: true})
	c := httpClient(t, s, true)
	m := bootstrapBody("payments", "zp-egress-1", "", dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener))
	r := post(t, c, s.URL()+"/bootstrap", mustJSON(t, m), "")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if bytes.Contains(r.body, []byte("initialMetadata")) || bytes.Contains(r.body, []byte("authorization")) {
		t.Errorf("bootstrap without a token carries credentials:\n%s", r.body)
	}
}

func TestBootstrapRecordsRequests(t *testing.T) {
	s := startTestServer(t, Options{})
	c := httpClient(t, s, true)
	body := mustJSON(t, bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener)))
	post(t, c, s.URL()+"/bootstrap", body, "application/json")
	post(t, c, s.URL()+"/bootstrap", []byte("x"), "application/json")
	recs := s.BootstrapRequests()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if recs[0].Status != 422 || !bytes.Equal(recs[0].Body, body) || recs[0].Header.Get("Accept") != "application/json" {
		t.Errorf("record 0: %d %q %v", recs[0].Status, recs[0].Body, recs[0].Header)
	}
	if recs[1].Status != 400 || string(recs[1].Body) != "x" || recs[1].At.Before(recs[0].At) {
		t.Errorf("record 1: %+v", recs[1])
	}
}
