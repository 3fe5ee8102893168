package agent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// The start-up line says whether the clock is to be trusted.
func TestClockStateWords(t *testing.T) {
	tests := []struct {
		s    timesync.Status
		want string
	}{
		{timesync.Status{Synced: true}, "synchronised"},
		{timesync.Status{}, "not synchronised"},
		{timesync.Status{Err: errors.New("adjtimex: operation not permitted")}, "unknown (adjtimex: operation not permitted)"},
	}
	for _, tt := range tests {
		if got := clockState(tt.s); got != tt.want {
			t.Errorf("clockState(%+v) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// While the bootstrap waits, /ready says for what, which attempt and
// when the next comes; a missing mesh is information (the agent proceeds
// once it is created), an unreachable control plane a warning.
func TestBootstrapWaitIsShownAndLogged(t *testing.T) {
	tests := []struct {
		name      string
		wait      bootstrap.Wait
		wantPhase state.Phase
		wantWords string
		wantLevel zapcore.Level
		wantLog   string
	}{
		{name: "mesh missing", wait: bootstrap.Wait{Attempt: 3, Next: 1234 * time.Millisecond, Err: &bootstrap.Error{Kind: bootstrap.MeshNotFound, Msg: "mesh missing"}},
			wantPhase: state.WaitingForMesh, wantWords: `waiting for mesh "payments" (attempt 3, next in 1.2s)`,
			wantLevel: zapcore.InfoLevel, wantLog: "create it and zoneproxy proceeds by itself"},
		{name: "control plane unreachable", wait: bootstrap.Wait{Attempt: 1, Next: 123456 * time.Microsecond, Err: &bootstrap.Error{Kind: bootstrap.Retryable, Msg: "connection refused"}},
			wantPhase: state.WaitingForControlPlane, wantWords: "waiting for the control plane (attempt 1, next in 123ms): connection refused",
			wantLevel: zapcore.WarnLevel, wantLog: "bootstrap failed, retrying"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, logs := testAgent(t, maintConfig())
			a.logWait(tt.wait)
			snap := a.tracker.Current()
			if snap.Phase != tt.wantPhase || snap.Detail != tt.wantWords {
				t.Errorf("%s %q, want %s %q", snap.Phase, snap.Detail, tt.wantPhase, tt.wantWords)
			}
			lines := logs.FilterMessageSnippet(tt.wantLog).All()
			if len(lines) != 1 || lines[0].Level != tt.wantLevel {
				t.Errorf("log %+v, want one %s line saying %q", logs.All(), tt.wantLevel, tt.wantLog)
			}
		})
	}
}

// /status answers GET and HEAD only, as JSON.
func TestStatusEndpointMethods(t *testing.T) {
	a, _ := testAgent(t, maintConfig())
	a.tracker.Set(state.WaitingForMesh, `waiting for mesh "payments"`)
	for _, tt := range []struct {
		method string
		code   int
		body   string
	}{
		{http.MethodGet, http.StatusOK, `"phase":"WAITING_FOR_MESH"`},
		{http.MethodHead, http.StatusOK, ""},
		{http.MethodPost, http.StatusMethodNotAllowed, "GET only"},
		{http.MethodDelete, http.StatusMethodNotAllowed, "GET only"},
	} {
		rec := httptest.NewRecorder()
		a.statusHandler().ServeHTTP(rec, httptest.NewRequest(tt.method, "/status", nil))
		if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
			t.Errorf("%s /status: %d %q, want %d with %q", tt.method, rec.Code, rec.Body.String(), tt.code, tt.body)
		}
		if tt.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /status: Allow %q", tt.method, rec.Header().Get("Allow"))
		}
		if tt.code == http.StatusOK && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s /status: Content-Type %q", tt.method, rec.Header().Get("Content-Type"))
		}
	}
}
