package cli

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// newLogger writes to w in console or JSON form. Under systemd's journal
// (JOURNAL_STREAM names w) timestamps are left to the journal, and each
// line starts with its syslog priority (<3>, <4>, <6>, <7>), which the
// journal takes off and keeps: `journalctl -p warning` then finds warnings.
func newLogger(w io.Writer, level zap.AtomicLevel, format string) *zap.Logger {
	enc := zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
		StacktraceKey: "", LineEnding: zapcore.DefaultLineEnding,
		EncodeTime: zapcore.ISO8601TimeEncoder, EncodeDuration: zapcore.StringDurationEncoder,
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeName: zapcore.FullNameEncoder,
	}
	journal := toJournal(w)
	if journal {
		enc.TimeKey = ""
	}
	var encoder zapcore.Encoder
	if format == "json" {
		encoder = zapcore.NewJSONEncoder(enc)
	} else {
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = oneLineEncoder{zapcore.NewConsoleEncoder(enc)}
	}
	if journal {
		encoder = priorityEncoder{encoder}
	}
	core := zapcore.NewCore(encoder, zapcore.AddSync(w), level)
	return zap.New(core).Named("zoneproxy")
}

// toJournal says whether w is the stream systemd connected to the journal:
// JOURNAL_STREAM holds its device and inode (systemd.exec(5)).
func toJournal(w io.Writer) bool {
	want := os.Getenv("JOURNAL_STREAM")
	f, ok := w.(*os.File)
	if want == "" || !ok {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	return want == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

var linePool = buffer.NewPool()

// oneLineEncoder escapes the console form's message, which zap writes raw:
// a message made with an error from elsewhere (a control plane's answer)
// could otherwise start a line of its own in the journal or a terminal.
type oneLineEncoder struct{ zapcore.Encoder }

func (e oneLineEncoder) Clone() zapcore.Encoder { return oneLineEncoder{e.Encoder.Clone()} }

func (e oneLineEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	ent.Message = errtext.OneLine(ent.Message)
	return e.Encoder.EncodeEntry(ent, fields)
}

// priorityEncoder starts each line with its level's syslog priority.
type priorityEncoder struct{ zapcore.Encoder }

func (e priorityEncoder) Clone() zapcore.Encoder { return priorityEncoder{e.Encoder.Clone()} }

func (e priorityEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	line, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return nil, err
	}
	out := linePool.Get()
	out.AppendString(syslogPriority(ent.Level))
	_, _ = out.Write(line.Bytes())
	line.Free()
	return out, nil
}

// syslogPriority is sd-daemon(3)'s prefix for a level.
func syslogPriority(l zapcore.Level) string {
	switch {
	case l <= zapcore.DebugLevel:
		return "<7>"
	case l == zapcore.InfoLevel:
		return "<6>"
	case l == zapcore.WarnLevel:
		return "<4>"
	case l == zapcore.ErrorLevel:
		return "<3>"
	}
	return "<2>"
}

func parseLevel(s string) zap.AtomicLevel {
	lvl, err := zapcore.ParseLevel(s)
	if err != nil {
		lvl = zapcore.InfoLevel
	}
	return zap.NewAtomicLevelAt(lvl)
}
