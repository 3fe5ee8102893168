package accesslog

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/throttle"
)

// backend owns one TCP connection to one address and a bounded queue of
// lines for it. The FIFO reader only ever appends, never waits.
type backend struct {
	addr       string
	limit      int // lines
	limitBytes int
	idle       time.Duration

	mu       sync.Mutex
	lines    [][]byte
	bytes    int
	lastLine time.Time // when the newest line was queued
	wake     chan struct{}

	forwarded, queueFull, writeFailed atomic.Uint64
	connected                         atomic.Bool
}

func newBackend(addr string, o *Options) *backend {
	return &backend{
		addr: addr, limit: o.QueueLines, limitBytes: o.QueueBytes, idle: o.IdleTimeout,
		lastLine: time.Now(), wake: make(chan struct{}, 1),
	}
}

// enqueue drops the oldest lines while the queue is over either bound: the
// newest lines say more about what is happening now.
func (b *backend) enqueue(line []byte) {
	b.mu.Lock()
	for len(b.lines) > 0 && (len(b.lines) >= b.limit || b.bytes+len(line) > b.limitBytes) {
		b.bytes -= len(b.lines[0])
		b.lines[0] = nil
		b.lines = b.lines[1:]
		b.queueFull.Add(1)
	}
	b.lines = append(b.lines, line)
	b.bytes += len(line)
	b.lastLine = time.Now()
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// idleAt is when b becomes idle unless another line comes.
func (b *backend) idleAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastLine.Add(b.idle)
}

// retireIfIdle empties the queue if b has had no line for b.idle, returning
// how many queued lines that dropped. The caller holds Streamer.mu, so no
// line can be queued meanwhile, nor after b leaves the map.
func (b *backend) retireIfIdle(now time.Time) (dropped int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastLine) < b.idle {
		return 0, false
	}
	dropped = len(b.lines)
	b.lines, b.bytes = nil, 0
	return dropped, true
}

func (b *backend) pop() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) == 0 {
		return nil
	}
	line := b.lines[0]
	b.lines[0] = nil
	b.lines = b.lines[1:]
	b.bytes -= len(line)
	return line
}

func (b *backend) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines)
}

// link is one open connection and the signal that its peer closed it.
type link struct {
	conn     net.Conn
	gone     chan struct{}
	stopHook func() bool
}

func (l *link) close() {
	l.stopHook()
	l.conn.Close()
}

// sender writes b's queue to its address until closing is closed and the
// queue is empty, or ctx ends (the flush bound).
type sender struct {
	b       *backend
	opts    *Options
	log     *zap.Logger
	closing <-chan struct{}
	retire  func(*backend) (dropped int, ok bool)
	warn    throttle.Throttle
	info    throttle.Throttle // a backend that stalls reconnects every WriteTimeout
	link    *link
}

func (s *sender) run(ctx context.Context) {
	defer s.hangUp()
	backoff := s.opts.BackoffMin
	for s.awaitLines(ctx) {
		// A dead or stalled backend goes too, however much is queued.
		if s.retireIfIdle() {
			return
		}
		if s.link != nil && isClosed(s.link.gone) {
			s.hangUp()
		}
		if s.link == nil {
			l, err := s.dial(ctx)
			if err != nil {
				s.warnf("cannot connect to access-log backend; lines queue until it is back", err, zap.Duration("retry_in", backoff))
				if !sleep(ctx, min(backoff, time.Until(s.b.idleAt()))) { // wake for the idle check
					return
				}
				backoff = min(2*backoff, s.opts.BackoffMax)
				continue
			}
			s.link, backoff = l, s.opts.BackoffMin
			s.b.connected.Store(true)
			s.infof("connected to access-log backend")
		}
		line := s.b.pop()
		s.link.conn.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if _, err := s.link.conn.Write(line); err != nil {
			s.b.writeFailed.Add(1)
			s.warnf("dropped an access-log line: writing to the backend failed; reconnecting", err)
			s.hangUp()
			continue
		}
		s.b.forwarded.Add(1)
	}
}

func (s *sender) hangUp() {
	if s.link != nil {
		s.link.close()
		s.link = nil
	}
	s.b.connected.Store(false)
}

// awaitLines waits until a line is queued; false means stop, also when the
// backend was retired as idle. A connection the peer closes meanwhile is
// hung up, so the next line redials.
func (s *sender) awaitLines(ctx context.Context) bool {
	for s.b.queued() == 0 {
		var gone chan struct{}
		if s.link != nil {
			gone = s.link.gone
		}
		idle := time.NewTimer(time.Until(s.b.idleAt()))
		select {
		case <-s.b.wake:
		case <-gone:
			s.infof("access-log backend closed the connection")
			s.hangUp()
		case <-idle.C:
			if s.retireIfIdle() {
				return false
			}
		case <-s.closing:
			if s.b.queued() == 0 {
				return false
			}
		case <-ctx.Done():
			return false
		}
		idle.Stop() // unstopped timers are collected anyway (Go 1.23+)
	}
	return ctx.Err() == nil
}

// retireIfIdle forgets the backend once no line has come for IdleTimeout:
// no traffic, or its MeshAccessLog no longer names it. The caller then stops and hangs up.
func (s *sender) retireIfIdle() bool {
	if time.Now().Before(s.b.idleAt()) {
		return false // the common case, without taking the streamer's lock
	}
	dropped, ok := s.retire(s.b)
	if !ok {
		return false
	}
	msg, fields := "closed and forgot the access-log backend: no line for it in idle_timeout (no traffic, or no MeshAccessLog names it any more); a later line reconnects",
		[]zap.Field{zap.Duration("idle_timeout", s.b.idle), zap.Int("dropped_lines", dropped)}
	if dropped > 0 {
		s.log.Warn(msg, fields...)
	} else {
		s.log.Info(msg, fields...)
	}
	return true
}

func (s *sender) dial(ctx context.Context) (*link, error) {
	dctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	conn, err := s.opts.Dial(dctx, "tcp", s.b.addr)
	if err != nil {
		return nil, err
	}
	l := &link{conn: conn, gone: make(chan struct{})}
	// A write blocked at the end of the flush bound must not hold Close.
	l.stopHook = context.AfterFunc(ctx, func() { conn.Close() })
	// Backends never send; EOF or an error means the peer is gone, and
	// noticing it now saves the next line from a write into a dead socket.
	go func() {
		io.Copy(io.Discard, conn)
		close(l.gone)
	}()
	return l, nil
}

func (s *sender) warnf(msg string, err error, fields ...zap.Field) {
	if ok, suppressed := s.warn.Allow(time.Now()); ok {
		s.log.Warn(msg, append(fields, zap.Error(err), zap.Int("suppressed_since_last", suppressed))...)
	}
}

func (s *sender) infof(msg string) {
	if ok, suppressed := s.info.Allow(time.Now()); ok {
		s.log.Info(msg, zap.Int("suppressed_since_last", suppressed))
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
