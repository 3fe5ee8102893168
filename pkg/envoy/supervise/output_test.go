package supervise

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Envoy's own lines keep their words and land at their level in the
// agent's log: a warning of Envoy's is a warning for the operator.
func TestEnvoyLinesKeepTheirLevel(t *testing.T) {
	tests := []struct {
		line string
		want zapcore.Level
	}{
		{"[2026-01-01 00:00:00.000][42][info][main] starting main dispatch loop", zapcore.InfoLevel},
		{"[2026-01-01 00:00:00.000][42][warning][config] gRPC config stream closed", zapcore.WarnLevel},
		{"[2026-01-01 00:00:00.000][42][error][upstream] cannot bind", zapcore.ErrorLevel},
		{"[2026-01-01 00:00:00.000][42][critical][main] error initializing", zapcore.ErrorLevel},
		{"[2026-01-01 00:00:00.000][42][debug][conn] new connection", zapcore.DebugLevel},
		{"[2026-01-01 00:00:00.000][42][trace][conn] bytes", zapcore.DebugLevel},
		{"a line in no format Envoy writes", zapcore.InfoLevel},
	}
	for _, tt := range tests {
		core, logs := observer.New(zap.DebugLevel)
		LogLine(zap.New(core), tt.line)
		all := logs.All()
		if len(all) != 1 || all[0].Level != tt.want || all[0].Message != tt.line {
			t.Errorf("%q logged as %+v, want one %s line with Envoy's words", tt.line, all, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	const tok = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJNZXNoIjoicGF5bWVudHMifQ.c2lnbmF0dXJl"
	tests := []struct {
		name, line, secret, want string
	}{
		{"Envoy's router header dump", "'authorization', '" + tok + "'", tok, "'authorization', '[redacted]'"},
		{"bearer value", "authorization: Bearer " + tok, tok, "authorization: Bearer [redacted]"},
		{"every occurrence", tok + " and again " + tok, tok, "[redacted] and again [redacted]"},
		{"the whole line", tok, tok, "[redacted]"},
		{"line without the token", "[info][main] starting main dispatch loop", tok, "[info][main] starting main dispatch loop"},
		{"a token prefix is not the token", "'authorization', '" + tok[:20] + "'", tok, "'authorization', '" + tok[:20] + "'"},
		{"no token known", "'authorization', 'x'", "", "'authorization', 'x'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.line, tt.secret); got != tt.want {
				t.Fatalf("Redact(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}
