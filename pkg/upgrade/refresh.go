package upgrade

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// After a reload the new program keeps the running Envoy, and then hands
// over to a new one beside it when that Envoy would start otherwise now:
// --envoy-binary reports another build (a package brought a new Envoy),
// the configuration changes Envoy's launch, or the control plane answers
// a bootstrap request with another bootstrap (a kuma-cp upgrade changed
// its template). What the proxy is (mesh, name, ports, where xDS goes) a
// reload never changes: the reload refuses it.

// Refresh checks the adopted Envoy after a reload.
type Refresh struct {
	Log *zap.Logger
	// Wait bounds the wait for kuma-cp's stream: a new Envoy needs it, and
	// kuma-cp holds the previous program's stream for its deregistration
	// delay (10 s by default).
	Wait time.Duration
	// Relay is the relay once Envoy runs, nil in direct mode (nothing
	// feeds a second Envoy); Serving: a live Envoy is supervised.
	Relay   func() Relay
	Serving func() bool
	// Changes says why the running Envoy is not the one this program
	// would start, and the new bootstrap when that is a reason.
	Changes func(ctx context.Context) (reasons []string, bootstrap []byte, err error)
	// Replace hands over to a new Envoy, on bootstrap if not nil.
	Replace func(ctx context.Context, why string, bootstrap []byte) error
}

// Run waits for kuma-cp's stream, then replaces the adopted Envoy if it
// is not as this program would start it. It only logs: the running Envoy
// keeps serving whatever happens.
func (r Refresh) Run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.Wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		relay := r.Relay()
		if relay == nil {
			return
		}
		if _, ok := relay.Takeable(); ok && r.Serving() {
			break
		}
		select {
		case <-ctx.Done():
			r.Log.Warn("after the reload, kuma-cp's stream did not come back in time to check whether Envoy must be replaced (another build, launch or bootstrap); `curl -X POST http://127.0.0.1:<"+string(config.KeyReadinessPort)+">/envoy/handover` starts a new Envoy by hand",
				zap.Duration("waited", r.Wait))
			return
		case <-tick.C:
		}
	}
	reasons, doc, err := r.Changes(ctx)
	switch {
	case err != nil:
		r.Log.Error("after the reload, cannot tell whether Envoy must be replaced; the running Envoy keeps serving", zap.Error(err))
		return
	case len(reasons) == 0:
		r.Log.Info("after the reload, the running Envoy is as this program would start it (build, launch, bootstrap); it keeps serving")
		return
	}
	why := strings.Join(reasons, "; ")
	if err := r.Replace(ctx, why, doc); err != nil {
		r.Log.Error("after the reload, a new Envoy could not take over; the running Envoy keeps serving", zap.String("why", why), zap.Error(err))
		return
	}
	r.Log.Info("after the reload, a new Envoy took over: " + why)
}
