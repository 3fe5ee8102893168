package relay

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// envoyRequest is one of Envoy's messages, raw for forwarding, and read
// once it is passed on (nil if it could not be).
type envoyRequest struct {
	raw []byte
	msg *request
}

// session is one Envoy stream.
type session struct {
	r          *Relay
	kind       streamKind
	envoy      grpc.ServerStream
	obs        *observer
	reqs       chan envoyRequest    // closed when Envoy's stream ends
	toObserver chan observedMessage // closed when the session ends
	subs       *subscriptions       // what Envoy asked for, to resume a stream with

	// early holds Envoy's requests until the control plane first answers,
	// to replay them on a new upstream stream if this one is refused.
	early     []envoyRequest
	responded atomic.Bool

	handover // handover.go: standby, detached, adopted
}

var (
	errEnvoyGone  = errors.New("Envoy closed its stream")
	errSuperseded = errors.New("a newer stream from this Envoy replaced this one")
)

func (s *session) readEnvoy(ctx context.Context) {
	defer close(s.reqs)
	for {
		f := &frame{}
		if err := s.envoy.RecvMsg(f); err != nil {
			return
		}
		select {
		case s.reqs <- envoyRequest{raw: f.b}:
		case <-ctx.Done():
			return
		}
	}
}

// observe reads one of Envoy's requests, tracks it and hands it to the
// observer, and returns it read: once per request, after it was forwarded
// (if it is), so reading is off the forwarding path.
func (s *session) observe(req envoyRequest) envoyRequest {
	msg, err := s.kind.readRequest(req.raw)
	if err != nil {
		s.r.log.Debug("an Envoy xDS request could not be decoded; forwarded anyway", zap.Error(err))
	}
	req.msg = msg
	if s.kind.cacheable() {
		s.subs.track(s.kind, req.raw, req.msg)
	}
	if req.msg != nil {
		s.toObserver <- observedMessage{req: req.msg}
	}
	return req
}

func (s *session) run(ctx context.Context) error {
	select {
	case first, ok := <-s.reqs:
		if !ok {
			return nil
		}
		s.early = append(s.early, s.observe(first))
	case <-ctx.Done():
		return nil
	}
	if s.kind.cacheable() && s.r.takeCacheFirst() {
		// Envoy was started on the cache because the control plane did not
		// answer: its first stream need not wait for another timeout.
		why := StreamError{Code: codes.Unavailable, Message: "the control plane did not answer the bootstrap request", Unreachable: true}
		state := Unreachable
		if s.r.opts.CacheFirstHeld {
			why, state = StreamError{Code: codes.Unavailable, Message: "the agent was reloaded: kuma-cp holds its previous stream", Held: true}, Held
		}
		if snap := s.r.usableCache(why); snap != nil {
			s.r.setUpstream(state)
			return s.fromCache(ctx, snap, why)
		}
	}
	var held heldRetries
	for attempt := 1; ; attempt++ {
		if s.r.Withdrawn() && s.kind.exclusive() {
			return s.park(ctx)
		}
		up, err := s.r.open(ctx, s.kind, s.rawEarly())
		if err == nil {
			var retry bool
			if retry, err = s.relayOn(ctx, up); !retry {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if s.r.Withdrawn() && s.kind.exclusive() {
			return s.park(ctx)
		}
		if errors.Is(err, errSuperseded) {
			return status.Error(codes.Aborted, errSuperseded.Error())
		}
		if errors.Is(err, errRetiredKind) {
			return s.park(ctx)
		}
		if errors.Is(err, io.EOF) {
			// Ended without an error: so ends Envoy's, which reconnects.
			s.r.log.Info("the control plane closed the stream", zap.String("stream", s.kind.name()))
			return nil
		}
		se := classify(err)
		var next time.Duration
		switch {
		case se.Held:
			next = held.next(s.r.opts.Backoff, s.r.opts.Now())
		case se.Retrying:
			next = s.r.opts.Backoff.Delay(attempt)
		}
		se = s.r.report(s.kind, err, attempt, next)
		if (se.Unreachable || se.Held || se.TooLarge || se.Unserved) && s.kind.cacheable() {
			// kuma-cp holds the stream of this node's previous run (a
			// restart), or cannot be reached: Envoy serves its last-known-good
			// configuration meanwhile, if it may.
			if snap := s.r.usableCache(se); snap != nil {
				return s.fromCache(ctx, snap, se)
			}
		}
		if !se.Retrying {
			return envoyStatus(err)
		}
		if !s.pause(ctx, next) {
			return nil
		}
	}
}

// relayOn forwards on up until it ends. retry: the control plane ended
// the stream before it answered (err says how), so it counts as never
// opened. Otherwise err is what Envoy's stream ends with, nil when Envoy
// left or ctx ended.
func (s *session) relayOn(ctx context.Context, up *upstream) (retry bool, err error) {
	res := s.relay(ctx, up)
	switch {
	case res.handedOver:
		return false, s.parkDetached(ctx)
	case res.envoyGone || ctx.Err() != nil:
		return false, nil
	case res.responded && s.r.Withdrawn() && s.kind.exclusive():
		return false, s.park(ctx)
	case res.responded && s.r.reregistered.CompareAndSwap(up, nil):
		return false, s.afterReregister(ctx)
	case res.responded && errors.Is(res.err, io.EOF):
		s.r.log.Info("the control plane closed the stream", zap.String("stream", s.kind.name()))
		return false, nil
	case res.responded:
		return false, s.r.upstreamEnded(s.kind, res.err)
	}
	return true, res.err
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
			s.early = append(s.early, s.observe(req))
		case <-ctx.Done():
			return false
		}
	}
}

type relayResult struct {
	err        error
	responded  bool // the control plane answered on this stream
	envoyGone  bool
	handedOver bool // another Envoy's session owns the stream now
}

// relay forwards both ways until either side ends, or a handover gives
// up to another session (handover.go).
func (s *session) relay(ctx context.Context, up *upstream) relayResult {
	up.claim(s)
	defer func() {
		if up.release(s) {
			up.close()
		}
	}()
	down := up.pumped
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				if up.release(s) {
					up.close()
					<-down
				}
				return relayResult{envoyGone: true}
			}
			if s.detached.Load() {
				return relayResult{handedOver: true}
			}
			if s.adopted && s.fromHandover(up, &req) {
				continue
			}
			err := up.send(req.raw)
			req = s.observe(req)
			if !s.responded.Load() {
				s.early = append(s.early, req)
			}
			if err != nil {
				return s.downEnd(up, <-down)
			}
		case err := <-down:
			return s.downEnd(up, err)
		case <-s.detach:
			return relayResult{handedOver: true}
		}
	}
}

// downEnd is how the stream's end reads to s; a session that handed the
// stream over leaves the end to the session that owns it now.
func (s *session) downEnd(up *upstream, err error) relayResult {
	if !up.owns(s) {
		up.pumped <- err
		return relayResult{handedOver: true}
	}
	return s.relayEnd(err)
}

func (s *session) relayEnd(err error) relayResult {
	if errors.Is(err, errEnvoyGone) {
		return relayResult{envoyGone: true}
	}
	return relayResult{err: err, responded: s.responded.Load()}
}

// pumpDown forwards the control plane's responses to the Envoy session
// that owns the stream, as received, uncopied; each goes to the observer
// before Envoy can ACK it.
func pumpDown(up *upstream) error {
	for {
		f, err := up.recvFrame()
		if err != nil {
			if up.superseded.Load() {
				return errSuperseded
			}
			return err
		}
		up.deliver.Lock()
		t := up.target
		if t == nil {
			f.free() // the owner left; its end closes the stream
		} else {
			err = t.forwardDown(f)
		}
		up.deliver.Unlock()
		if err != nil {
			return err
		}
	}
}

// forwardDown sends one of the control plane's responses to Envoy and
// frees it.
func (s *session) forwardDown(f *receivedFrame) error {
	f.buf.Ref() // the observer's, freed once it has read them
	s.queued.Add(1)
	s.toObserver <- observedMessage{resp: f}
	if !s.responded.Swap(true) && s.kind.exclusive() {
		s.r.setUpstream(Connected)
	}
	err := s.send(f)
	f.free()
	if err != nil {
		return errEnvoyGone
	}
	return nil
}

// fromCache serves Envoy from snap until the control plane accepts a
// stream, then carries on relaying on that stream: Envoy does not
// reconnect. why is what made the relay serve the cache.
func (s *session) fromCache(ctx context.Context, snap *lkgcache.Snapshot, why StreamError) error {
	up, first, err := s.serveCache(ctx, snap, why)
	if up == nil {
		return err
	}
	s.r.log.Info("the control plane accepted this proxy's stream: Envoy carries on with it, without reconnecting",
		zap.String("stream", s.kind.name()))
	s.early = nil
	// What Envoy asked for after the resumed stream was opened.
	for _, raw := range s.subs.takeSince() {
		if err := up.send(raw); err != nil {
			break
		}
	}
	if err := s.forwardDown(first); err != nil {
		up.close()
		return nil
	}
	_, err = s.relayOn(ctx, up) // answered already: never a retry
	return err
}

// serveCache answers Envoy from snap while trying the control plane in the
// background. It returns the stream the control plane accepted with its
// first response; or no stream and what Envoy's stream ends with (nil:
// Envoy left or ctx ended).
func (s *session) serveCache(ctx context.Context, snap *lkgcache.Snapshot, why StreamError) (*upstream, *receivedFrame, error) {
	s.r.useCache(snap, why)
	cs := s.kind.cacheServer(snap)
	for _, req := range s.early {
		if err := s.answer(cs, req); err != nil {
			return nil, nil, nil
		}
	}
	probe := make(chan probeResult, 1)
	probed := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	go func() {
		defer close(probed)
		probe <- s.r.probe(pctx, ctx, s.kind, why, func() [][]byte { return s.resumeRequests(pctx) })
	}()
	ended := func() { stop(); <-probed }
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				ended()
				return nil, nil, nil
			}
			if err := s.answer(cs, s.observe(req)); err != nil {
				ended()
				return nil, nil, nil
			}
		case res := <-probe:
			stop()
			<-probed
			switch {
			case res.up != nil:
				return res.up, res.first, nil
			case ctx.Err() != nil:
				return nil, nil, nil
			case errors.Is(res.err, errSuperseded):
				return nil, nil, status.Error(codes.Aborted, errSuperseded.Error())
			case errors.Is(res.err, errWithdrawn), errors.Is(res.err, errRetiredKind):
				return nil, nil, s.park(ctx)
			}
			return nil, nil, envoyStatus(res.err)
		case <-ctx.Done():
			ended()
			return nil, nil, nil
		}
	}
}

// resumeRequests opens a resumed stream with what Envoy holds: once Envoy
// has answered the cached responses sent to it (for at most
// cacheAnswerWait) and the observer has applied every answer, or the
// resumed stream would offer the control plane older versions than Envoy
// has, and kuma-cp would not remove what Envoy holds and it no longer
// has (nil when ctx ends first).
func (s *session) resumeRequests(ctx context.Context) [][]byte {
	timeout := time.NewTimer(cacheAnswerWait)
	defer timeout.Stop()
	for {
		if !s.observedSoFar(ctx) {
			return nil
		}
		unanswered, answered := s.obs.cachedUnanswered()
		if !unanswered {
			return s.subs.snapshot(s.kind, &s.r.envoyState)
		}
		select {
		case <-answered:
		case <-timeout.C:
			return s.subs.snapshot(s.kind, &s.r.envoyState)
		case <-ctx.Done():
			return nil
		}
	}
}

// cacheAnswerWait bounds how long a resumed stream waits for Envoy to
// answer the cached responses sent to it: Envoy answers at once, and one
// it has not answered by then is taken as not held.
var cacheAnswerWait = time.Second

// observedSoFar waits until the observer has applied every message sent
// to it so far; false if ctx ends first.
func (s *session) observedSoFar(ctx context.Context) bool {
	observed := make(chan struct{})
	select {
	case s.toObserver <- observedMessage{barrier: observed}:
	case <-ctx.Done():
		return false
	}
	select {
	case <-observed:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *session) answer(cs cacheServer, req envoyRequest) error {
	if req.msg == nil {
		return nil
	}
	b, err := cs.answer(req.msg)
	if err != nil {
		s.r.log.Warn("the cached configuration could not be encoded for Envoy", zap.String("type", shortType(req.msg.typeURL)), zap.Error(err))
		return nil
	}
	if b == nil {
		return nil
	}
	s.toObserver <- observedMessage{cached: b}
	return s.send(&frame{b: b})
}

// park keeps Envoy's stream open without configuration while the proxy
// is withdrawn from the control plane: Envoy keeps what it has and
// serves on until it is drained.
func (s *session) park(ctx context.Context) error {
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				return nil
			}
			s.observe(req)
		case <-ctx.Done():
			return nil
		}
	}
}

// open opens an upstream stream; for ADS, after closing the node's
// previous one (the control plane allows one per node).
func (r *Relay) open(ctx context.Context, kind streamKind, replay [][]byte) (*upstream, error) {
	if !kind.exclusive() {
		return r.dialUpstream(ctx, kind.method(), replay)
	}
	replay = r.withAgentMetadata(kind, replay)
	r.upMu.Lock()
	defer r.upMu.Unlock()
	if err := ctx.Err(); err != nil {
		// Envoy left while this waited: r.active is a newer session's.
		return nil, err
	}
	if r.Withdrawn() {
		return nil, errWithdrawn // the withdrawn Dataplane's stream holds the node
	}
	if r.isRetired(kind) {
		return nil, errRetiredKind // a new Envoy speaks the control plane's protocol now
	}
	if r.active != nil {
		r.active.superseded.Store(true)
		r.active.close()
		r.active = nil
	}
	u, err := r.dialUpstream(ctx, kind.method(), replay)
	if err == nil {
		r.active = u
		r.watchUnanswered(kind, u)
	}
	return u, err
}

// probeResult is how a probe ended: an accepted stream with its first
// response, or why not.
type probeResult struct {
	up    *upstream
	first *receivedFrame
	err   error
}

// probe retries the control plane until a stream gets its first response,
// which it returns with the stream; the control plane refuses (that error);
// or ctx ends. requests opens each attempt (nil: Envoy has not said enough
// yet to resume; the attempt waits). why is the failure that made Envoy
// run on the cache, which paces the first attempt. The stream it returns
// lives as long as streamCtx; ctx ending stops the probe.
func (r *Relay) probe(ctx, streamCtx context.Context, kind streamKind, why StreamError, requests func() [][]byte) probeResult {
	var held heldRetries
	next := r.opts.Backoff.Delay(1)
	if why.Held {
		next = held.next(r.opts.Backoff, r.opts.Now())
	}
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return probeResult{err: ctx.Err()}
		case <-t.C:
		}
		if r.Withdrawn() && kind.exclusive() {
			return probeResult{err: errWithdrawn}
		}
		reqs := requests()
		if reqs == nil {
			next = r.opts.Backoff.Delay(1)
			continue
		}
		octx, ocancel := context.WithCancel(streamCtx)
		unwatch := context.AfterFunc(ctx, ocancel)
		up, err := r.open(octx, kind, reqs)
		if err == nil {
			var f *receivedFrame
			if f, err = up.recvFrame(); err == nil && unwatch() {
				return probeResult{up: up, first: f} // ctx's end no longer ends it
			}
			if err == nil {
				f.free()
			}
			up.close()
			if up.superseded.Load() {
				ocancel()
				return probeResult{err: errSuperseded} // a new Envoy stream took over: no failure
			}
		}
		unwatch()
		ocancel()
		if ctx.Err() != nil {
			return probeResult{err: ctx.Err()}
		}
		if errors.Is(err, errWithdrawn) || errors.Is(err, errRetiredKind) {
			return probeResult{err: err}
		}
		next = r.opts.Backoff.Delay(attempt + 1)
		if errors.Is(err, io.EOF) {
			// Ended cleanly (a replica shutting down): no refusal, try again.
			r.log.Debug("the control plane closed a reconnection attempt", zap.String("stream", kind.name()))
			continue
		}
		if classify(err).Held {
			next = held.next(r.opts.Backoff, r.opts.Now())
		}
		if se := r.report(kind, err, attempt, next); !se.Unreachable && !se.Retrying {
			return probeResult{err: err}
		}
	}
}

// upstreamEnded handles the end of a stream the control plane had
// answered on: Envoy's stream ends too, and Envoy reconnects.
func (r *Relay) upstreamEnded(kind streamKind, err error) error {
	if errors.Is(err, errSuperseded) {
		return status.Error(codes.Aborted, errSuperseded.Error())
	}
	r.report(kind, err, 0, 0)
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
	case isHeld(err):
		se.Retrying, se.Held = true, true
	case isTooLarge(st):
		se.Retrying, se.TooLarge = true, true
	case se.Code == codes.Unimplemented:
		se.Retrying, se.Unserved = true, true
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
