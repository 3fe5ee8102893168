package localserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

func TestDrainAndUndrainEndpoints(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, state.NewTracker())
	s.ServeMetricsOn(mln)
	var drains, undrains int
	refuse := false
	s.HandleMaintenance(Maintenance{
		Drain: func() error {
			if refuse {
				return errors.New("not serving yet (WAITING_FOR_MESH: …)")
			}
			drains++
			return nil
		},
		Undrain: func() { undrains++ },
	})
	go s.Serve()
	defer s.Shutdown(context.Background())
	call := func(method, addr, path string) (int, string) {
		t.Helper()
		return testutil.HTTP(t, method, "http://"+addr+path, "")
	}
	lo := ln.Addr().String()
	if code, _ := call(http.MethodGet, lo, "/drain"); code != http.StatusMethodNotAllowed || drains != 0 {
		t.Fatalf("GET /drain: %d, %d drains; want 405 and none", code, drains)
	}
	if code, body := call(http.MethodPost, lo, "/drain"); code != http.StatusAccepted || drains != 1 || !strings.Contains(body, "DRAINED") {
		t.Fatalf("POST /drain: %d %q, %d drains", code, body, drains)
	}
	refuse = true
	if code, body := call(http.MethodPost, lo, "/drain"); code != http.StatusConflict || !strings.Contains(body, "WAITING_FOR_MESH") {
		t.Fatalf("a refused drain: %d %q, want 409 with the reason", code, body)
	}
	if code, _ := call(http.MethodPost, lo, "/undrain"); code != http.StatusAccepted || undrains != 1 {
		t.Fatalf("POST /undrain: %d, %d undrains", code, undrains)
	}
	// The scrapers' listener never drains the proxy.
	if code, _ := call(http.MethodPost, mln.Addr().String(), "/drain"); code != http.StatusNotFound || drains != 1 {
		t.Fatalf("POST /drain on the metrics listener: %d, want 404", code)
	}
}
