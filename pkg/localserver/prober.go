package localserver

import (
	"context"
	"errors"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// Pace of the Envoy prober. probeTimeout bounds one question: Envoy's
// admin answers /ready in well under a millisecond when it is well, so a
// second without an answer is a hung (or stopped) Envoy. Variables for
// tests.
var (
	probeEvery   = time.Second
	probeTimeout = time.Second
)

// prober asks Envoy's admin /ready every probeEvery and publishes the
// answer in the tracker, where /ready, the metrics and sd_notify's STATUS=
// read it (state.Snapshot.Verdict) without asking Envoy themselves: a hung
// Envoy then makes none of them wait, and all of them say the same.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startProber(tr *state.Tracker, p EnvoyProbe) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	pr := &prober{cancel: cancel, done: make(chan struct{})}
	// Probed, with no answer yet: the phase stands until the first one.
	tr.SetEnvoy(state.EnvoyHealth{Probed: true})
	go func() {
		defer close(pr.done)
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			h := ask(ctx, p)
			if ctx.Err() != nil {
				return
			}
			tr.SetEnvoy(h)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return pr
}

// ask puts one question to Envoy.
func ask(ctx context.Context, p EnvoyProbe) state.EnvoyHealth {
	h := state.EnvoyHealth{Probed: true, At: time.Now()}
	qctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	word, live, err := p(qctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (err != nil && qctx.Err() != nil):
		h.Err = "no answer within " + probeTimeout.String() + " (is Envoy stopped or hung?)"
	case err != nil:
		h.Err = err.Error()
	default:
		h.Word, h.Live = word, live
	}
	return h
}

func (pr *prober) stop() {
	if pr == nil {
		return
	}
	pr.cancel()
	<-pr.done
}
