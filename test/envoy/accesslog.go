package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

// minFlushSize is AccessLogFileImpl's MIN_FLUSH_SIZE: more buffered than
// this wakes the flush thread before the timer.
const minFlushSize = 64 * 1024

// accessLogManager is Envoy's AccessLogManagerImpl: one file per path for
// the life of the process, shared by every logger naming it, never closed
// when a listener goes away.
type accessLogManager struct {
	mu         sync.Mutex
	files      map[string]*logFile
	flushEvery time.Duration
	stats      *statStore
	log        *logger
}

func newAccessLogManager(flushEvery time.Duration, st *statStore, log *logger) *accessLogManager {
	for _, n := range []string{"write_buffered", "write_completed", "write_failed", "flushed_by_timer", "reopen_failed"} {
		st.counter("filesystem." + n)
	}
	st.gauge("filesystem.write_total_buffered")
	if flushEvery <= 0 {
		flushEvery = time.Millisecond // a zero timer fires at once, again and again
	}
	return &accessLogManager{files: map[string]*logFile{}, flushEvery: flushEvery, stats: st, log: log}
}

// fileFlags is AccessLogFileImpl::defaultFlags on POSIX (Write, Create,
// Append), created 0644 before the umask.
const fileFlags = os.O_WRONLY | os.O_CREATE | os.O_APPEND

// open returns the shared file for path, opening it now if it is new. The
// open is synchronous, as in Envoy's listener build: with a FIFO that has
// no reader it blocks the caller (Envoy's main thread) until one appears,
// and a missing path becomes a regular file.
func (m *accessLogManager) open(path string) (*logFile, error) {
	m.mu.Lock()
	f, ok := m.files[path]
	m.mu.Unlock()
	if ok {
		return f, nil
	}
	fd, err := os.OpenFile(path, fileFlags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("unable to open file '%s': %s", path, strerror(err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[path]; ok {
		fd.Close()
		return f, nil
	}
	f = &logFile{path: path, fd: fd, m: m, wake: make(chan struct{}, 1), done: make(chan struct{})}
	m.files[path] = f
	go f.flushLoop()
	return f, nil
}

// reopen is /reopen_logs and SIGUSR1: every file is closed and opened again
// by its flush thread, which is where a FIFO without a reader blocks.
func (m *accessLogManager) reopen() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.files {
		f.mu.Lock()
		f.reopenWanted = true
		f.mu.Unlock()
		f.kick()
	}
}

// close flushes what is buffered and closes every file, as the manager's
// destructor does at exit (a flush stuck on a full FIFO holds the exit up).
func (m *accessLogManager) close() {
	m.mu.Lock()
	files := make([]*logFile, 0, len(m.files))
	for _, f := range m.files {
		files = append(files, f)
	}
	m.mu.Unlock()
	for _, f := range files {
		f.close()
	}
}

type logFile struct {
	path string
	m    *accessLogManager

	mu           sync.Mutex // guards buf, reopenWanted, exit
	buf          []byte
	reopenWanted bool
	exit         bool

	fdMu sync.Mutex // held while writing, so flushes never interleave
	fd   *os.File

	wake chan struct{}
	done chan struct{}
}

// write buffers a line; the flush thread writes it.
func (f *logFile) write(line string) {
	f.mu.Lock()
	f.buf = append(f.buf, line...)
	big := len(f.buf) > minFlushSize
	f.mu.Unlock()
	f.m.stats.counter("filesystem.write_buffered").inc()
	f.m.stats.gauge("filesystem.write_total_buffered").add(int64(len(line)))
	if big {
		f.kick()
	}
}

func (f *logFile) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *logFile) flushLoop() {
	defer close(f.done)
	t := time.NewTicker(f.m.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-f.wake:
		case <-t.C:
			f.m.stats.counter("filesystem.flushed_by_timer").inc()
		}
		f.mu.Lock()
		data, reopen, exit := f.buf, f.reopenWanted, f.exit
		f.buf, f.reopenWanted = nil, false
		f.mu.Unlock()
		if exit {
			return
		}
		if reopen {
			f.doReopen()
		}
		f.doWrite(data)
	}
}

func (f *logFile) doReopen() {
	f.fdMu.Lock()
	defer f.fdMu.Unlock()
	if f.fd != nil {
		f.fd.Close()
		f.fd = nil
	}
	fd, err := os.OpenFile(f.path, fileFlags, 0o644)
	if err != nil {
		f.m.stats.counter("filesystem.reopen_failed").inc()
		return
	}
	f.fd = fd
}

// doWrite drains data even when the file is not open, as Envoy does.
func (f *logFile) doWrite(data []byte) {
	if len(data) == 0 {
		return
	}
	f.fdMu.Lock()
	if f.fd != nil {
		n, err := f.fd.Write(data)
		if err == nil && n == len(data) {
			f.m.stats.counter("filesystem.write_completed").inc()
		} else {
			f.m.stats.counter("filesystem.write_failed").inc()
			if err != nil && !isEPIPE(err) {
				f.m.log.logf(lvlDebug, "misc", "source/common/access_log/access_log_manager_impl.cc:99", "access log write to %s failed: %s", f.path, strerror(err))
			}
		}
	}
	f.fdMu.Unlock()
	f.m.stats.gauge("filesystem.write_total_buffered").add(-int64(len(data)))
}

func isEPIPE(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.EPIPE
}

func (f *logFile) close() {
	f.mu.Lock()
	f.exit = true
	data := f.buf
	f.buf = nil
	f.mu.Unlock()
	f.kick()
	<-f.done
	f.doWrite(data)
	f.fdMu.Lock()
	if f.fd != nil {
		f.fd.Close()
		f.fd = nil
	}
	f.fdMu.Unlock()
}

// reopenLogs is POST /reopen_logs.
func (as *adminServer) reopenLogs(*http.Request, url.Values) adminResponse {
	as.s.accessLogs.reopen()
	return text(http.StatusOK, "OK\n")
}
