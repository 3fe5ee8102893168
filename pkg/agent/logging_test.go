package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
)

// fakeLoggingEndpoint is Envoy's /logging: it records the raw queries
// POST /logging sends it.
type fakeLoggingEndpoint struct {
	mu      sync.Mutex
	queries []string
}

func (f *fakeLoggingEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
}

func (f *fakeLoggingEndpoint) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

func TestLoggingTakesOnlyWhatItUnderstands(t *testing.T) {
	tests := []struct {
		query     string
		wantCode  int
		wantEnvoy string // raw query Envoy receives; "" = no call
		wantAgent zapcore.Level
	}{
		{"envoy=debug", 200, "level=debug", zapcore.InfoLevel},
		{"envoy=warn", 200, "level=warning", zapcore.InfoLevel},
		{"envoy=upstream:trace", 200, "upstream=trace", zapcore.InfoLevel},
		{"level=debug&envoy=info", 200, "level=info", zapcore.DebugLevel},
		{"envoy=debug%26paths%3Dupstream:trace", 400, "", zapcore.InfoLevel},
		{"envoy=debug%26level%3Dtrace", 400, "", zapcore.InfoLevel},
		{"envoy=Upstream:debug", 400, "", zapcore.InfoLevel},
		{"envoy=upstream:loud", 400, "", zapcore.InfoLevel},
		{"envoy=", 200, "", zapcore.InfoLevel},
		// A bad Envoy level leaves the agent's level alone too.
		{"level=debug&envoy=loud", 400, "", zapcore.InfoLevel},
		{"level=dpanic", 400, "", zapcore.InfoLevel},
		{"level=loud", 400, "", zapcore.InfoLevel},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			fake := &fakeLoggingEndpoint{}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			admin := envoy.NewAdmin(envoy.AdminAddress{TCP: strings.TrimPrefix(srv.URL, "http://")})
			defer admin.Close()
			running := &supervise.Supervisor{}
			running.Started(supervise.Current{Admin: admin})
			level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
			h := loggingHandler(level, running.Now, zap.NewNop())

			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/logging?"+tt.query, nil))
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			got := fake.seen()
			switch {
			case tt.wantEnvoy == "" && len(got) != 0:
				t.Errorf("Envoy received %q, want nothing", got)
			case tt.wantEnvoy != "" && (len(got) != 1 || got[0] != tt.wantEnvoy):
				t.Errorf("Envoy received %q, want %q", got, tt.wantEnvoy)
			}
			if level.Level() != tt.wantAgent {
				t.Errorf("agent level %s, want %s", level.Level(), tt.wantAgent)
			}
		})
	}
}
