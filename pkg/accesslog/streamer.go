package accesslog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

const (
	// maxLineBytes bounds one line; Envoy's json_format lines are far shorter.
	maxLineBytes = 1 << 20
	// readBufferBytes matches Envoy's 64 KiB flush.
	readBufferBytes = 64 << 10
	// flushTimeout bounds how long Close spends on queued lines.
	flushTimeout = time.Second
	// warnEvery is the most often one kind of drop is logged.
	warnEvery = 10 * time.Second
)

// Options configures a Streamer. Zero values take the defaults noted.
type Options struct {
	// Path of the FIFO: kumasock.AccessLog(workDir, name, mesh). Required.
	Path string
	// Log receives connection changes and rate-limited drop warnings.
	Log *zap.Logger
	// QueueLines bounds each backend's queue; the oldest line goes first. Default 10000.
	QueueLines int
	// DialTimeout bounds one connection attempt. Default 5s.
	DialTimeout time.Duration
	// WriteTimeout bounds writing one line; past it the line is dropped and
	// the connection redialled. Default 5s.
	WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between failed dials, doubling
	// from min to max. Defaults 200ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// Dial opens a backend connection. Default net.Dialer with 15s keepalive.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func (o *Options) withDefaults() (Options, error) {
	out := *o
	if out.Path == "" {
		return out, errors.New("accesslog: Options.Path is empty; pass kumasock.AccessLog(workDir, name, mesh)")
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &out.DialTimeout, 5 * time.Second},
		{"WriteTimeout", &out.WriteTimeout, 5 * time.Second},
		{"BackoffMin", &out.BackoffMin, 200 * time.Millisecond},
		{"BackoffMax", &out.BackoffMax, 10 * time.Second},
	} {
		if *f.v < 0 {
			return out, fmt.Errorf("accesslog: Options.%s is %v; use a positive duration, or 0 for %v", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if out.BackoffMax < out.BackoffMin {
		return out, fmt.Errorf("accesslog: Options.BackoffMax (%v) is below BackoffMin (%v); raise it", out.BackoffMax, out.BackoffMin)
	}
	if out.QueueLines < 0 {
		return out, fmt.Errorf("accesslog: Options.QueueLines is %d; use a positive bound, or 0 for 10000", out.QueueLines)
	}
	if out.QueueLines == 0 {
		out.QueueLines = 10000
	}
	if out.Log == nil {
		out.Log = zap.NewNop()
	}
	if out.Dial == nil {
		out.Dial = (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext
	}
	return out, nil
}

// Streamer reads the FIFO and forwards each line to its backend.
type Streamer struct {
	opts Options
	log  *zap.Logger
	fifo *os.File

	// Reader state, owned by the reader goroutine.
	pending    []byte
	discarding bool
	warn       throttle

	mu       sync.Mutex
	backends map[string]*backend

	read, invalid, tooLong atomic.Uint64

	ctx        context.Context
	cancel     context.CancelFunc
	closing    chan struct{}
	stopping   atomic.Bool
	flushBy    time.Time
	readerDone chan struct{}
	senders    sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// Start creates the FIFO at opts.Path (replacing whatever is there) and
// starts reading it. Call it before Envoy starts, so Envoy opens a FIFO with
// a reader rather than blocking or creating a regular file.
func Start(opts Options) (*Streamer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fifo, err := makeFIFO(o.Path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Streamer{
		opts:       o,
		log:        o.Log.With(zap.String("fifo", o.Path)),
		fifo:       fifo,
		warn:       throttle{every: warnEvery},
		backends:   map[string]*backend{},
		ctx:        ctx,
		cancel:     cancel,
		closing:    make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	go s.readLoop()
	return s, nil
}

func (s *Streamer) readLoop() {
	defer close(s.readerDone)
	buf := make([]byte, readBufferBytes)
	for {
		n, err := s.fifo.Read(buf)
		s.consume(buf[:n])
		switch {
		case err == nil:
		case s.stopping.Load():
			s.drain(buf)
			return
		case errors.Is(err, fs.ErrClosed):
			return
		default:
			// Holding the FIFO O_RDWR rules out EOF; anything else is odd
			// enough to log, and reading must go on.
			s.log.Error("reading the access-log FIFO failed; retrying", zap.Error(err))
			if !sleep(s.ctx, time.Second) {
				return
			}
		}
	}
}

// drain reads what Envoy already wrote before Close, without waiting for more.
func (s *Streamer) drain(buf []byte) {
	rc, err := s.fifo.SyscallConn()
	if err != nil || s.fifo.SetReadDeadline(time.Time{}) != nil {
		return
	}
	for time.Now().Before(s.flushBy) {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			return
		}
		s.consume(buf[:n])
	}
}

// consume splits a read into lines, carrying a partial line to the next read.
func (s *Streamer) consume(chunk []byte) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if !s.discarding {
				s.pending = append(s.pending, chunk...)
				if len(s.pending) > maxLineBytes {
					s.discarding, s.pending = true, s.pending[:0]
				}
			}
			return
		}
		segment := chunk[:i]
		chunk = chunk[i+1:]
		s.read.Add(1)
		if s.discarding || len(s.pending)+len(segment) > maxLineBytes {
			s.discarding, s.pending = false, s.pending[:0]
			s.tooLong.Add(1)
			s.warnDrop("dropped an access-log line longer than 1 MiB", nil)
			continue
		}
		line := segment
		if len(s.pending) > 0 {
			line = append(s.pending, segment...)
		}
		s.dispatch(line)
		s.pending = s.pending[:0]
		if cap(s.pending) > readBufferBytes {
			s.pending = nil // do not keep a megabyte for one long line
		}
	}
}

func (s *Streamer) dispatch(line []byte) {
	addr, payload, ok := parseLine(line)
	if !ok {
		s.invalid.Add(1)
		s.warnDrop(`dropped an access-log line that is neither {"address":"host:port","message":…} nor host:port;text`, line)
		return
	}
	s.backendFor(addr).enqueue(payload)
}

func (s *Streamer) warnDrop(msg string, line []byte) {
	ok, suppressed := s.warn.allow(time.Now())
	if !ok {
		return
	}
	fields := []zap.Field{zap.Int("drops_suppressed_since_last", suppressed)}
	if line != nil {
		fields = append(fields, zap.ByteString("line_start", line[:min(len(line), 64)]))
	}
	s.log.Warn(msg, fields...)
}

func (s *Streamer) backendFor(addr string) *backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.backends[addr]; ok {
		return b
	}
	b := newBackend(addr, s.opts.QueueLines)
	s.backends[addr] = b
	snd := &sender{
		b:       b,
		opts:    &s.opts,
		log:     s.log.With(zap.String("backend", addr)),
		closing: s.closing,
		warn:    throttle{every: warnEvery},
		info:    throttle{every: warnEvery},
	}
	s.senders.Add(1)
	go func() {
		defer s.senders.Done()
		snd.run(s.ctx)
	}()
	return b
}

// Close stops reading (after taking what Envoy already wrote), gives queued
// lines up to a second to reach their backends, closes the connections and
// removes the FIFO. Calling it again returns the first result.
func (s *Streamer) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Streamer) close() error {
	s.flushBy = time.Now().Add(flushTimeout)
	s.stopping.Store(true)
	if s.fifo.SetReadDeadline(time.Now()) != nil {
		s.fifo.Close() // not pollable: closing is the only way to stop the read
	}
	<-s.readerDone
	s.fifo.Close()

	close(s.closing)
	hardStop := time.AfterFunc(time.Until(s.flushBy), s.cancel)
	s.senders.Wait()
	hardStop.Stop()
	s.cancel()

	unflushed := 0
	s.mu.Lock()
	for _, b := range s.backends {
		unflushed += b.queued()
	}
	s.mu.Unlock()
	if unflushed > 0 {
		s.log.Warn("access-log lines still queued at shutdown were dropped", zap.Int("lines", unflushed))
	}
	if err := os.Remove(s.opts.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("access-log FIFO %s: cannot remove it: %w", s.opts.Path, err)
	}
	return nil
}
