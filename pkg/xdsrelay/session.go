package xdsrelay

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// envoyRequest is one of Envoy's messages, raw for forwarding and read
// (nil if it could not be) for the cache.
type envoyRequest struct {
	raw []byte
	msg *request
}

// session is one Envoy stream.
type session struct {
	r     *Relay
	d     dialect
	envoy grpc.ServerStream
	obs   *observer
	reqs  chan envoyRequest // closed when Envoy's stream ends
	notes chan note         // to the observer, closed when the session ends

	// early holds Envoy's requests until the control plane first answers,
	// to replay them on a new upstream stream if this one is refused.
	early     []envoyRequest
	responded atomic.Bool
}

var (
	errEnvoyGone   = errors.New("Envoy closed its stream")
	errSuperseded  = errors.New("a newer stream from this Envoy replaced this one")
	reachableAgain = "zoneproxy: the control plane is reachable again; reconnect to resynchronise"
)

func (s *session) readEnvoy(ctx context.Context) {
	defer close(s.reqs)
	for {
		f := &frame{}
		if err := s.envoy.RecvMsg(f); err != nil {
			return
		}
		msg, err := s.d.readRequest(f.b)
		if err != nil {
			s.r.log.Debug("an Envoy xDS request could not be decoded; forwarding it anyway", zap.Error(err))
		}
		select {
		case s.reqs <- envoyRequest{raw: f.b, msg: msg}:
		case <-ctx.Done():
			return
		}
	}
}

// observe has a request of Envoy's observed; each request once.
func (s *session) observe(req envoyRequest) {
	if req.msg != nil {
		s.notes <- note{req: req.msg}
	}
}

func (s *session) run(ctx context.Context) error {
	select {
	case first, ok := <-s.reqs:
		if !ok {
			return nil
		}
		s.observe(first)
		s.early = append(s.early, first)
	case <-ctx.Done():
		return nil
	}
	for attempt := 1; ; attempt++ {
		up, err := s.r.open(ctx, s.d, s.rawEarly())
		if err == nil {
			res := s.relay(ctx, up)
			if res.envoyGone || ctx.Err() != nil {
				return nil
			}
			err = res.err
			if res.responded && !errors.Is(err, io.EOF) {
				return s.r.upstreamEnded(s.d, err)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errSuperseded) {
			return status.Error(codes.Aborted, errSuperseded.Error())
		}
		if errors.Is(err, io.EOF) {
			// Ended without an error: so ends Envoy's, which reconnects.
			s.r.log.Info("the control plane closed the stream", zap.String("stream", s.d.name()))
			return nil
		}
		var next time.Duration
		if classify(err).Retrying {
			next = s.r.opts.Backoff.Delay(attempt)
		}
		switch se := s.r.report(s.d, err, attempt, next); {
		case se.Retrying:
			if !s.pause(ctx, next) {
				return nil
			}
		case se.Unreachable && s.d.cacheable():
			if snap := s.r.usableCache(); snap != nil {
				return s.serveCache(ctx, snap)
			}
			return envoyStatus(err)
		default:
			return envoyStatus(err)
		}
	}
}

func (s *session) rawEarly() [][]byte {
	out := make([][]byte, len(s.early))
	for i, r := range s.early {
		out[i] = r.raw
	}
	return out
}

// pause waits d, still taking Envoy's requests for the replay. False if
// Envoy left.
func (s *session) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case req, ok := <-s.reqs:
			if !ok {
				return false
			}
			s.observe(req)
			s.early = append(s.early, req)
		case <-ctx.Done():
			return false
		}
	}
}

type relayResult struct {
	err       error
	responded bool // the control plane answered on this stream
	envoyGone bool
}

// relay forwards both ways until either side ends.
func (s *session) relay(ctx context.Context, up *upstream) relayResult {
	defer up.close()
	down := make(chan error, 1)
	go func() { down <- s.pumpDown(up) }()
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				up.close()
				<-down
				return relayResult{envoyGone: true}
			}
			if !s.responded.Load() {
				s.early = append(s.early, req)
			}
			s.observe(req)
			if err := up.send(req.raw); err != nil {
				return s.relayEnd(<-down)
			}
		case err := <-down:
			return s.relayEnd(err)
		}
	}
}

func (s *session) relayEnd(err error) relayResult {
	if errors.Is(err, errEnvoyGone) {
		return relayResult{envoyGone: true}
	}
	return relayResult{err: err, responded: s.responded.Load()}
}

// pumpDown forwards the control plane's responses to Envoy as received,
// uncopied; each is noted for the observer before Envoy can ACK it.
func (s *session) pumpDown(up *upstream) error {
	for {
		f, err := up.recvHeld()
		if err != nil {
			if up.superseded.Load() {
				return errSuperseded
			}
			return err
		}
		f.buf.Ref() // the observer's, freed once it has copied the bytes
		s.notes <- note{resp: f}
		s.responded.Store(true)
		err = s.envoy.SendMsg(f)
		f.free()
		if err != nil {
			return errEnvoyGone
		}
	}
}

// serveCache answers Envoy from snap while trying the control plane in the
// background; once it accepts a stream, Envoy is told to reconnect.
func (s *session) serveCache(ctx context.Context, snap *lkgcache.Snapshot) error {
	s.r.useCache(snap)
	cs := s.d.cacheServer(snap)
	for _, req := range s.early {
		if err := s.answer(cs, req); err != nil {
			return nil
		}
	}
	probe := make(chan error, 1)
	probed := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	defer func() { stop(); <-probed }() // no probe outlives its session
	first := s.early[0].raw
	go func() { defer close(probed); probe <- s.r.probe(pctx, s.d, first) }()
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				return nil
			}
			s.observe(req)
			if err := s.answer(cs, req); err != nil {
				return nil
			}
		case err := <-probe:
			if err == nil {
				s.r.log.Info("the control plane accepts streams again; Envoy reconnects to resynchronise")
				return status.Error(codes.Unavailable, reachableAgain)
			}
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, errSuperseded) {
				return status.Error(codes.Aborted, errSuperseded.Error())
			}
			return envoyStatus(err)
		case <-ctx.Done():
			return nil
		}
	}
}

func (s *session) answer(cs cacheServer, req envoyRequest) error {
	if req.msg == nil {
		return nil
	}
	b := cs.answer(req.msg)
	if b == nil {
		return nil
	}
	s.notes <- note{cached: b}
	return s.envoy.SendMsg(&frame{b: b})
}

// open opens an upstream stream; for ADS, after closing the node's
// previous one (the control plane allows one per node).
func (r *Relay) open(ctx context.Context, d dialect, replay [][]byte) (*upstream, error) {
	if !d.exclusive() {
		return r.dialUpstream(ctx, d.method(), replay)
	}
	r.upMu.Lock()
	defer r.upMu.Unlock()
	if err := ctx.Err(); err != nil {
		// Envoy left while this waited: r.active is a newer session's.
		return nil, err
	}
	if r.active != nil {
		r.active.superseded.Store(true)
		r.active.close()
		r.active = nil
	}
	u, err := r.dialUpstream(ctx, d.method(), replay)
	if err == nil {
		r.active = u
	}
	return u, err
}

// probe retries the control plane until a stream gets its first response
// (nil), the control plane refuses (that error) or ctx ends.
func (r *Relay) probe(ctx context.Context, d dialect, first []byte) error {
	next := r.opts.Backoff.Delay(1)
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		up, err := r.open(ctx, d, [][]byte{first})
		if err == nil {
			_, err = up.recv()
			up.close()
			if err == nil {
				return nil
			}
			if up.superseded.Load() {
				return errSuperseded // a new Envoy stream took over: no failure
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next = r.opts.Backoff.Delay(attempt + 1)
		if errors.Is(err, io.EOF) {
			// Ended cleanly (a replica shutting down): no refusal, try again.
			r.log.Debug("the control plane closed a reconnection attempt", zap.String("stream", d.name()))
			continue
		}
		if se := r.report(d, err, attempt, next); !se.Unreachable && !se.Retrying {
			return err
		}
	}
}

// upstreamEnded handles the end of a stream the control plane had
// answered on: Envoy's stream ends too, and Envoy reconnects.
func (r *Relay) upstreamEnded(d dialect, err error) error {
	if errors.Is(err, errSuperseded) {
		return status.Error(codes.Aborted, errSuperseded.Error())
	}
	r.report(d, err, 0, 0)
	return envoyStatus(err)
}

// classify turns an upstream failure into what the agent is told.
func classify(err error) StreamError {
	var te *tokenError
	if errors.As(err, &te) {
		return StreamError{Code: codes.Unauthenticated, Message: err.Error(), Retrying: true, Local: true}
	}
	if errors.Is(err, errCertificate) {
		return StreamError{Code: codes.Unavailable, Message: err.Error()}
	}
	st, _ := status.FromError(err)
	se := StreamError{Code: st.Code(), Message: st.Message()}
	switch {
	case strings.Contains(se.Message, "already an active stream"):
		se.Retrying = true
	case se.Code == codes.Unavailable || se.Code == codes.DeadlineExceeded:
		se.Unreachable = true
	}
	return se
}

// envoyStatus is what Envoy's stream ends with for an upstream failure.
func envoyStatus(err error) error {
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Error(codes.Unavailable, err.Error())
}
