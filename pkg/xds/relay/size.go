package relay

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A response over Options.MaxResponseBytes fails its stream in grpc-go
// (ResourceExhausted) before it is read whole: it is neither relayed nor
// cached, Envoy keeps what it has (the cache serves it if it may), and
// the relay asks again at its backoff, as while kuma-cp is unreachable.

const tooLargeText = "grpc: received message larger than max"

func isTooLarge(st *status.Status) bool {
	return st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), tooLargeText)
}

// reportTooLarge counts and logs an over-bound response: at most once a
// minute, as it repeats at every retry while the control plane sends it.
func (r *Relay) reportTooLarge(kind streamKind, se StreamError) {
	r.met.responseRejected("too_large")
	r.setUpstream(Refused)
	r.mu.Lock()
	r.lastErr = &se
	ok, suppressed := r.tooLargeWarn.Allow(time.Now())
	r.mu.Unlock()
	if ok {
		var size, bound int
		_, _ = fmt.Sscanf(se.Message[strings.Index(se.Message, "(")+1:], "%d vs. %d", &size, &bound)
		fields := withRetryFields([]zap.Field{zap.String("stream", kind.name()), zap.Int("bytes", size), zap.Int("bound", bound)}, se, suppressed)
		r.log.Warn("the control plane sent a response larger than the relay accepts: it is neither relayed to Envoy nor cached; Envoy keeps its configuration (the cache serves it if it may) and the relay asks again at its backoff", fields...)
	}
	if f := r.opts.Events.StreamError; f != nil {
		f(se)
	}
}
