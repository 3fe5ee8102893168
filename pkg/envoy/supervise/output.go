package supervise

import (
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Output is a spec's Output: each of Envoy's lines, redacted of secret()
// (the token last sent), logged at the level Envoy gave it.
func Output(log *zap.Logger, secret func() string) func(line string) {
	return func(line string) { LogLine(log, Redact(line, secret())) }
}

// Redact replaces every occurrence of secret in line; a secret too short
// to be a token is left alone.
func Redact(line, secret string) string {
	if len(secret) < 8 {
		return line
	}
	return strings.ReplaceAll(line, secret, "[redacted]")
}

// LogLine keeps Envoy's line as the message and maps its level, read from
// "[time][pid][level][component] msg".
func LogLine(log *zap.Logger, line string) {
	lvl := zapcore.InfoLevel
	if fields := strings.SplitN(line, "]", 4); len(fields) == 4 {
		switch strings.TrimPrefix(fields[2], "[") {
		case "trace", "debug":
			lvl = zapcore.DebugLevel
		case "warning":
			lvl = zapcore.WarnLevel
		case "error", "critical":
			lvl = zapcore.ErrorLevel
		}
	}
	if ce := log.Check(lvl, line); ce != nil {
		ce.Write()
	}
}
