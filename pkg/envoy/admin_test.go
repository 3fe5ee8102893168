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
