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
	addr  string
	limit int

	mu    sync.Mutex
	lines [][]byte
	wake  chan struct{}

	forwarded, queueFull, writeFailed atomic.Uint64
	connected                         atomic.Bool
}

func newBackend(addr string, limit int) *backend {
	return &backend{addr: addr, limit: limit, wake: make(chan struct{}, 1)}
}

// enqueue drops the oldest line when the queue is full: the newest lines
// say more about what is happening now.
func (b *backend) enqueue(line []byte) {
	b.mu.Lock()
	if len(b.lines) >= b.limit {
		b.lines[0] = nil
		b.lines = b.lines[1:]
		b.queueFull.Add(1)
	}
	b.lines = append(b.lines, line)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
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
	warn    throttle.Throttle
	info    throttle.Throttle // a backend that stalls reconnects every WriteTimeout
	link    *link
}

func (s *sender) run(ctx context.Context) {
	defer s.hangUp()
	backoff := s.opts.BackoffMin
	for s.awaitLines(ctx) {
		if s.link != nil && isClosed(s.link.gone) {
			s.hangUp()
		}
		if s.link == nil {
			l, err := s.dial(ctx)
			if err != nil {
				s.warnf("cannot connect to access-log backend; lines queue until it is back", err, zap.Duration("retry_in", backoff))
				if !sleep(ctx, backoff) {
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

// awaitLines waits until a line is queued; false means stop. A connection
// the peer closes meanwhile is hung up, so the next line redials.
func (s *sender) awaitLines(ctx context.Context) bool {
	for s.b.queued() == 0 {
		var gone chan struct{}
		if s.link != nil {
			gone = s.link.gone
		}
		select {
		case <-s.b.wake:
		case <-gone:
			s.infof("access-log backend closed the connection")
			s.hangUp()
		case <-s.closing:
			if s.b.queued() == 0 {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
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

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
