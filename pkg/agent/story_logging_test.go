package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
)

// /logging as `zoneproxy log-level` meets it: what it answers when Envoy
// is not there or refuses, and what a change leaves in the log.
func TestLoggingAnswersAndLogs(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		query     string
		envoy     int // Envoy's /logging status; 0: no Envoy running
		wantCode  int
		wantBody  string
		wantAgent zapcore.Level
		wantLog   string
	}{
		{name: "read", method: http.MethodGet, wantCode: 200, wantBody: "zoneproxy: info", wantAgent: zapcore.InfoLevel},
		{name: "another method", method: http.MethodPut, query: "level=debug", wantCode: 405, wantBody: "use GET to read", wantAgent: zapcore.InfoLevel},
		{name: "the agent's level", method: http.MethodPost, query: "level=warn", wantCode: 200, wantBody: "zoneproxy: warn",
			wantAgent: zapcore.WarnLevel, wantLog: "log level changed"},
		{name: "Envoy's level before Envoy runs", method: http.MethodPost, query: "level=debug&envoy=debug", wantCode: 503,
			wantBody: "Envoy is not running yet", wantAgent: zapcore.InfoLevel},
		{name: "Envoy refuses", method: http.MethodPost, query: "level=debug&envoy=debug", envoy: 500, wantCode: 502,
			wantBody: "Envoy refused the level", wantAgent: zapcore.InfoLevel},
		{name: "Envoy's level", method: http.MethodPost, query: "envoy=upstream:debug", envoy: 200, wantCode: 200,
			wantBody: "zoneproxy: info", wantAgent: zapcore.InfoLevel, wantLog: "Envoy log level changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			running := &supervise.Supervisor{}
			if tt.envoy != 0 {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tt.envoy) }))
				defer srv.Close()
				admin := envoy.NewAdmin(envoy.AdminAddress{TCP: strings.TrimPrefix(srv.URL, "http://")})
				defer admin.Close()
				running.Started(supervise.Current{Admin: admin})
			}
			level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
			core, logs := observer.New(zap.DebugLevel)
			rec := httptest.NewRecorder()
			loggingHandler(level, running.Now, zap.New(core)).ServeHTTP(rec, httptest.NewRequest(tt.method, "/logging?"+tt.query, nil))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == 405 && rec.Header().Get("Allow") != "GET, POST" {
				t.Errorf("Allow %q", rec.Header().Get("Allow"))
			}
			if level.Level() != tt.wantAgent {
				t.Errorf("agent level %s, want %s", level.Level(), tt.wantAgent)
			}
			if n := logs.Len(); (tt.wantLog == "" && n != 0) || (tt.wantLog != "" && (n != 1 || logs.FilterMessage(tt.wantLog).Len() != 1)) {
				t.Errorf("log %+v, want %q", logs.All(), tt.wantLog)
			}
		})
	}
}

// The MeshMetric policy kuma-cp sends through Envoy's dynamic
// configuration: applied, removed, or, when unreadable, ignored with the
// previous one kept, each said in the log.
func TestMeshMetricPolicyIsAppliedRemovedOrKept(t *testing.T) {
	policy, err := os.ReadFile("../observability/meshmetric/testdata/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		body      []byte
		wantErr   bool
		wantLog   string
		wantLevel zapcore.Level
	}{
		{name: "a policy", body: policy, wantLog: "MeshMetric policy applied", wantLevel: zapcore.InfoLevel},
		{name: "removed", body: nil, wantLog: "MeshMetric policy removed: scrapes are unfiltered and OpenTelemetry pushes stop", wantLevel: zapcore.InfoLevel},
		{name: "unreadable", body: []byte(`{"observability":`), wantErr: true,
			wantLog: "ignoring a MeshMetric configuration the agent cannot read; the previous one stays", wantLevel: zapcore.WarnLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, logs := testAgent(t, maintConfig())
			dir, err := os.MkdirTemp("", "zp-obs-") // sockets want a short path
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			o, err := a.startObservability(dir, func(context.Context, string) (string, error) { return "", nil })
			if err != nil {
				t.Fatal(err)
			}
			defer o.close()
			if err := o.applyMeshMetric(tt.body); (err != nil) != tt.wantErr {
				t.Fatalf("applyMeshMetric: %v, want an error %v", err, tt.wantErr)
			}
			if logs.FilterMessageSnippet(tt.wantLog).FilterLevelExact(tt.wantLevel).Len() != 1 {
				t.Errorf("log %+v, want %q at %s", logs.All(), tt.wantLog, tt.wantLevel)
			}
		})
	}
}
