package envoy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A /stats page larger than the agent reads is refused, not cut: a cut
// page ends in a cut sample, and its last families (histograms) go missing.
func TestStatsLargerThanTheLimitIsAnError(t *testing.T) {
	defer func(old int) { maxStatsBytes = old }(maxStatsBytes)
	maxStatsBytes = 1 << 10
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{maxStatsBytes, false}, {maxStatsBytes + 1, true}} {
		page := strings.Repeat("x", tc.size)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) }))
		a := NewAdmin(AdminAddress{TCP: strings.TrimPrefix(srv.URL, "http://")})
		got, err := a.Stats(context.Background(), "format=prometheus")
		a.Close()
		srv.Close()
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "larger than")):
			t.Errorf("%d bytes: %d read, err %v; want an error", tc.size, len(got), err)
		case !tc.wantErr && (err != nil || got != page):
			t.Errorf("%d bytes: %d read, err %v; want the whole page", tc.size, len(got), err)
		}
	}
}

func TestBuildIsServerInfosVersion(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
		wantErr    bool
	}{
		{"envoy", `{"version":"816188b8/1.39.0/Clean/RELEASE/BoringSSL","state":"LIVE"}`, 200, "816188b8/1.39.0/Clean/RELEASE/BoringSSL", false},
		{"no version field", `{"state":"LIVE"}`, 200, "", false},
		{"not JSON", `version: x`, 200, "", true},
		{"an error status", `{}`, 503, "", true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/server_info" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(tc.code)
			io.WriteString(w, tc.body)
		}))
		a := NewAdmin(AdminAddress{TCP: strings.TrimPrefix(srv.URL, "http://")})
		got, err := a.Build(context.Background())
		a.Close()
		srv.Close()
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
