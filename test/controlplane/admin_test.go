package controlplane

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func adminDo(t *testing.T, s *Server, method, path, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.AdminURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestAdminAPI(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"default"}})

	expect := func(method, path, body string, wantStatus int, wantBody string) string {
		t.Helper()
		st, got, _ := adminDo(t, s, method, path, body)
		if st != wantStatus || (wantBody != "" && got != wantBody) {
			t.Errorf("%s %s: %d %q, want %d %q", method, path, st, got, wantStatus, wantBody)
		}
		return got
	}
	expect("PUT", "/meshes/payments", `{"type":"Mesh","name":"payments"}`, 201, "{}")
	expect("PUT", "/meshes/payments", "", 200, "{}")
	expect("PUT", "/meshes/payments", `{"type":"Mesh","name":"other"}`, 400, "name from the URL has to be the same as in body")
	expect("GET", "/meshes", "", 200, `{"items":[{"type":"Mesh","name":"default"},{"type":"Mesh","name":"payments"}],"next":null,"total":2}`)
	expect("DELETE", "/meshes/default", "", 200, "{}")
	expect("DELETE", "/meshes/default", "", 404, "")
	if !s.meshExists("payments") || s.meshExists("default") {
		t.Errorf("meshes %v", s.meshNames())
	}

	st, tok, h := adminDo(t, s, "POST", "/tokens/dataplane", `{"mesh":"later","workload":"zp-egress","tags":{"team":["a"]},"validFor":"24h"}`)
	if st != 200 || h.Get("Content-Type") != "text/plain" || strings.ContainsAny(tok, "\n ") {
		t.Fatalf("token: %d %q %q", st, h.Get("Content-Type"), tok)
	}
	claims, err := s.tokens.parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	if claims.Mesh != "later" || claims.Workload != "zp-egress" || claims.Tags["team"][0] != "a" {
		t.Errorf("claims %+v", claims)
	}
	if d := claims.ExpiresAt.Sub(claims.IssuedAt.Time); d != 24*time.Hour+5*time.Second {
		t.Errorf("validity %s", d)
	}
	expect("POST", "/tokens/dataplane", `{"name":"x"}`, 400, "mesh: cannot be empty")
	expect("POST", "/tokens/dataplane", `{"mesh":"m","validFor":"soon"}`, 400, `validFor: is invalid: time: invalid duration "soon"`)
	expect("POST", "/tokens/dataplane", `{"mesh":"m","type":"ingress"}`, 400, "type: ingress is not a valid proxy type")

	expect("PUT", "/faults", `{"bootstrapStatus":503,"bootstrapDelay":"2s","rejectADSAuth":true,"hang":false}`, 200,
		`{"refuseConnections":false,"bootstrapStatus":503,"bootstrapDelay":"2s","rejectADSAuth":true,"hang":false}`)
	if f := s.currentFaults(); f.BootstrapDelay != 2*time.Second || f.BootstrapStatus != 503 || !f.RejectADSAuth {
		t.Errorf("faults %+v", f)
	}
	expect("GET", "/faults", "", 200, `{"refuseConnections":false,"bootstrapStatus":503,"bootstrapDelay":"2s","rejectADSAuth":true,"hang":false}`)
	expect("PUT", "/faults", `{"bootstrapDelay":"nope"}`, 400, "")
	expect("PUT", "/faults", `{}`, 200, `{"refuseConnections":false,"bootstrapStatus":0,"bootstrapDelay":"0s","rejectADSAuth":false,"hang":false}`)

	addr := s.Addr()
	got := expect("POST", "/restart?down=10ms", "", 200, "")
	if !strings.Contains(got, addr) || s.Addr() != addr {
		t.Errorf("restart: %s (addr %s)", got, addr)
	}
	expect("POST", "/restart?down=forever", "", 400, "")

	c := httpClient(t, s, true)
	post(t, c, s.URL()+"/bootstrap", []byte("{}"), "application/json")
	var recs struct {
		Count   int               `json:"count"`
		Records []BootstrapRecord `json:"records"`
	}
	if err := json.Unmarshal([]byte(expect("GET", "/bootstrap-requests", "", 200, "")), &recs); err != nil {
		t.Fatal(err)
	}
	if recs.Count != 1 || len(recs.Records) != 1 || string(recs.Records[0].Body) != "{}" || recs.Records[0].Status != 422 {
		t.Errorf("bootstrap requests %+v", recs)
	}
	expect("GET", "/proxies", "", 200, "[]")
}

// A control plane left running keeps only the newest requests, and says
// how many it let go.
func TestBootstrapRecordsKeepTheNewest(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"default"}})
	for i := range maxRecords + 5 {
		s.addRecord(BootstrapRecord{Status: i})
	}
	recs := s.BootstrapRequests()
	if len(recs) != maxRecords || recs[0].Status != 5 || recs[len(recs)-1].Status != maxRecords+4 {
		t.Fatalf("kept %d records, statuses %d..%d; want %d, 5..%d", len(recs), recs[0].Status, recs[len(recs)-1].Status, maxRecords, maxRecords+4)
	}
	_, body, _ := adminDo(t, s, http.MethodGet, "/bootstrap-requests", "")
	var got struct{ Count, Dropped int }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Count != maxRecords || got.Dropped != 5 {
		t.Errorf("admin API: count %d, dropped %d; want %d, 5", got.Count, got.Dropped, maxRecords)
	}
}
