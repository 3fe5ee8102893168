package accesslog

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	// QueueBytes bounds each backend's queue in bytes, the same way: lines
	// of up to 1 MiB would let QueueLines alone hold ~10 GiB. The newest line
	// is kept even if it alone is larger. Default 16 MiB.
	QueueBytes int
	// IdleTimeout closes and forgets a backend that has had no new line for
	// this long, dropping its queue: no MeshAccessLog names it any more.
	// Default 5m.
	IdleTimeout time.Duration
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
		{"IdleTimeout", &out.IdleTimeout, 5 * time.Minute},
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
	if out.QueueBytes < 0 {
		return out, fmt.Errorf("accesslog: Options.QueueBytes is %d; use a positive bound, or 0 for 16 MiB", out.QueueBytes)
	}
	if out.QueueBytes == 0 {
		out.QueueBytes = 16 << 20
	}
	if out.Log == nil {
		out.Log = zap.NewNop()
	}
	if out.Dial == nil {
		out.Dial = (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext
	}
	return out, nil
}
