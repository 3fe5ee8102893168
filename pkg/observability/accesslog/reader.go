package accesslog

import (
	"bytes"
	"errors"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
)

// sleep waits, or ends early with its context (false).
var sleep = backoff.Sleep

// readLoop reads the FIFO until Close, then takes what is left in it.
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
	if s.fifo.SetReadDeadline(time.Time{}) != nil {
		return
	}
	for time.Now().Before(s.flushBy) {
		n, err := readAvailable(s.fifo, buf)
		if err != nil || n <= 0 {
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
					s.discarding, s.pending = true, nil
				}
			}
			return
		}
		segment := chunk[:i]
		chunk = chunk[i+1:]
		s.read.Add(1)
		if s.discarding || len(s.pending)+len(segment) > maxLineBytes {
			s.discarding, s.pending = false, nil
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
			s.pending = nil // keep no megabyte for one long line
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
	s.enqueue(addr, payload)
}

func (s *Streamer) warnDrop(msg string, line []byte) {
	ok, suppressed := s.warn.Allow(time.Now())
	if !ok {
		return
	}
	fields := []zap.Field{zap.Int("drops_suppressed_since_last", suppressed)}
	if line != nil {
		fields = append(fields, zap.ByteString("line_start", line[:min(len(line), 64)]))
	}
	s.log.Warn(msg, fields...)
}
