package cli

import (
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger writes to w in console or JSON form. Under systemd's journal
// (JOURNAL_STREAM set) timestamps are left to the journal.
func newLogger(w io.Writer, level zap.AtomicLevel, format string) *zap.Logger {
	enc := zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
		StacktraceKey: "", LineEnding: zapcore.DefaultLineEnding,
		EncodeTime: zapcore.ISO8601TimeEncoder, EncodeDuration: zapcore.StringDurationEncoder,
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeName: zapcore.FullNameEncoder,
	}
	if os.Getenv("JOURNAL_STREAM") != "" {
		enc.TimeKey = ""
	}
	var encoder zapcore.Encoder
	if format == "json" {
		encoder = zapcore.NewJSONEncoder(enc)
	} else {
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	core := zapcore.NewCore(encoder, zapcore.AddSync(w), level)
	return zap.New(core).Named("zoneproxy")
}

func parseLevel(s string) zap.AtomicLevel {
	lvl, err := zapcore.ParseLevel(s)
	if err != nil {
		lvl = zapcore.InfoLevel
	}
	return zap.NewAtomicLevelAt(lvl)
}
