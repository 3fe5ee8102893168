package accesslog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/throttle"
)

// Streamer reads the FIFO and forwards each line to its backend.
type Streamer struct {
	opts Options
	log  *zap.Logger
	fifo *os.File

	// Reader state, owned by the reader goroutine.
	pending    []byte
	discarding bool
	warn       throttle.Throttle

	mu       sync.Mutex
	backends map[string]*backend

	read, invalid, tooLong, idle atomic.Uint64

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
	return start(o, fifo), nil
}

// start reads fifo, opened at o.Path.
func start(o Options, fifo *os.File) *Streamer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Streamer{
		opts:       o,
		log:        o.Log.With(zap.String("fifo", o.Path)),
		fifo:       fifo,
		warn:       throttle.Throttle{Every: warnEvery},
		backends:   map[string]*backend{},
		ctx:        ctx,
		cancel:     cancel,
		closing:    make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	go s.readLoop()
	return s
}

// enqueue queues a line for addr, starting a backend for it if there is
// none. Holding s.mu orders it against retire: a line lands either in a
// backend that stays or in a fresh one.
func (s *Streamer) enqueue(addr string, line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backends[addr]
	if !ok {
		b = s.startBackend(addr)
	}
	b.enqueue(line)
}

func (s *Streamer) startBackend(addr string) *backend {
	b := newBackend(addr, &s.opts)
	s.backends[addr] = b
	snd := &sender{
		b:       b,
		opts:    &s.opts,
		log:     s.log.With(zap.String("backend", addr)),
		closing: s.closing,
		retire:  s.retire,
		warn:    throttle.Throttle{Every: warnEvery},
		info:    throttle.Throttle{Every: warnEvery},
	}
	s.senders.Add(1)
	go func() {
		defer s.senders.Done()
		snd.run(s.ctx)
	}()
	return b
}

// retire forgets b, and with it its metric series, if it is idle. Its
// queued lines are counted as dropped.
func (s *Streamer) retire(b *backend) (dropped int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dropped, ok = b.retireIfIdle(time.Now())
	if ok {
		delete(s.backends, b.addr)
		s.idle.Add(uint64(dropped))
	}
	return dropped, ok
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
