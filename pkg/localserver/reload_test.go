package localserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// POST /reload answers before the agent replaces itself (the exec closes
// the connection), with the whole body; a refusal is 409 with the reason,
// one that only a restart lifts 501.
// After a reload /ready ends with the generations.
func TestReloadEndpoint(t *testing.T) {
	ln := loopbackListener(t)
	tr := state.NewTracker()
	tr.Set(state.Ready, "Envoy ready")
	s := New(ln, tr)
	refuse, impossible, execs := false, false, make(chan struct{}, 1)
	s.HandleReload(func() (func() error, error) {
		if impossible {
			return nil, restartOnly{errors.New("reload refused: the new program reads handover version 9.9; restart instead")}
		}
		if refuse {
			return nil, errors.New("reload refused: the new program cannot take over: exit 1")
		}
		return func() error { execs <- struct{}{}; return nil }, nil
	})
	gen := ""
	s.SetGenerations(func() string { return gen })
	go s.Serve()
	defer s.Shutdown(context.Background())
	base := "http://" + ln.Addr().String()
	if code, _ := testutil.HTTP(t, http.MethodGet, base+"/reload", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /reload: %d", code)
	}
	if code, body := testutil.HTTP(t, http.MethodPost, base+"/reload", ""); code != http.StatusAccepted || !strings.Contains(body, "/status") {
		t.Fatalf("POST /reload: %d %q", code, body)
	}
	<-execs
	refuse = true
	if code, body := testutil.HTTP(t, http.MethodPost, base+"/reload", ""); code != http.StatusConflict || !strings.Contains(body, "cannot take over") {
		t.Fatalf("a refused reload: %d %q", code, body)
	}
	impossible = true
	if code, body := testutil.HTTP(t, http.MethodPost, base+"/reload", ""); code != http.StatusNotImplemented || !strings.Contains(body, "restart instead") {
		t.Fatalf("a reload only a restart can do: %d %q", code, body)
	}
	if _, body := testutil.HTTP(t, http.MethodGet, base+"/ready", ""); strings.TrimSpace(body) != "READY" {
		t.Fatalf("/ready before any reload: %q", body)
	}
	gen = "agent generation 2, Envoy generation 1"
	if _, body := testutil.HTTP(t, http.MethodGet, base+"/ready", ""); strings.TrimSpace(body) != "READY\n"+gen {
		t.Fatalf("/ready after a reload: %q", body)
	}
}

// restartOnly is a refusal as the agent marks one only a restart lifts.
type restartOnly struct{ error }

func (restartOnly) CannotReload() bool { return true }
