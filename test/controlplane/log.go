package controlplane

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// logger writes one plain-text line per event. It never sees tokens:
// callers log mesh/name/status, not request bodies or metadata.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func newLogger(w io.Writer) *logger {
	if w == nil {
		w = io.Discard
	}
	return &logger{w: w}
}

func (l *logger) printf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), msg)
}

// Write lets net/http and grpc loggers write through the same sink.
func (l *logger) Write(p []byte) (int, error) {
	l.printf("%s", p)
	return len(p), nil
}
