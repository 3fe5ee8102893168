package agent

import "testing"

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
			if got := redact(tt.line, tt.secret); got != tt.want {
				t.Fatalf("redact(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}
