// Package sdnotify tells systemd about the agent's lifecycle (Type=notify).
// It only observes pkg/state; it never drives the agent.
//
// READY=1 means "the agent is up and supervising": it is sent once, when
// Envoy is live or when the agent settles into waiting for the mesh or the
// control plane, so a missing mesh does not hold up boot. STATUS= always
// says which of these it is.
package sdnotify

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// Options tunes Run.
type Options struct {
	// Healthy reports whether Envoy is alive and its admin API answers.
	// It gates watchdog pings once Envoy runs. nil means always healthy.
	Healthy func(ctx context.Context) bool
	// StopGrace is the time after the drain deadline that the agent may
	// still need: stopping Envoy (SIGTERM, then SIGKILL) and the last
	// write of the last-known-good cache.
	StopGrace time.Duration
	Log       *zap.Logger
	// Generations, when it says something (after a reload: the agent's
	// and Envoy's generations), ends every STATUS= line in brackets.
	Generations func() string
}

// drainRefresh is how often STOPPING progress and the stop-timeout extension
// are re-sent while draining. A variable so tests can shorten it.
var drainRefresh = time.Second

// Run speaks sd_notify until ctx ends or the tracker reaches STOPPED/FAILED.
// A no-op returning nil when NOTIFY_SOCKET is unset.
func Run(ctx context.Context, tr *state.Tracker, opts Options) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	n := &notifier{log: log.Named("sdnotify")}

	// Deferred first so it runs last: the watchdog ends once ctx is cancelled.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Set once Envoy has been started; from then on its health gates the
	// watchdog, whatever the phase says.
	var envoyStarted atomic.Bool

	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		// A malformed WATCHDOG_USEC must not stop READY/STATUS from flowing.
		n.log.Warn("ignoring invalid watchdog settings", zap.Error(err))
		interval = 0
	}
	if interval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchdog(ctx, n, interval, &envoyStarted, opts.Healthy)
		}()
	}

	sub := tr.Subscribe()
	readySent := false
	var last state.Snapshot // the last one reported
	var (
		draining  bool
		drainSnap state.Snapshot // the latest TERMINATING snapshot
		drainEnd  time.Time      // drain deadline + stop grace
		drainTick *time.Ticker
		tickC     <-chan time.Time // nil unless refreshing
	)
	stopTick := func() {
		if drainTick != nil {
			drainTick.Stop()
			drainTick, tickC = nil, nil
		}
	}
	defer stopTick()

	// handle reports one snapshot; true means the agent is done.
	handle := func(s state.Snapshot) bool {
		prev := last
		last = s
		if envoyOnly(prev, s) && prev.Verdict() == s.Verdict() {
			return false // what Envoy answered changed, not what the unit says
		}
		if s.Phase == state.EnvoyStarting || s.Phase == state.Ready {
			envoyStarted.Store(true)
		}
		switch s.Phase {
		case state.Terminating:
			first := !draining
			draining = true
			drainSnap = s
			drainEnd = time.Time{}
			if !s.DrainDeadline.IsZero() {
				drainEnd = s.DrainDeadline.Add(opts.StopGrace)
			}
			msg := stopMessage(time.Now(), s, drainEnd, opts.StopGrace)
			if first {
				msg = append([]Field{Stopping}, msg...)
			}
			n.send(msg...)
			stopTick()
			if !drainEnd.IsZero() {
				drainTick = time.NewTicker(drainRefresh)
				tickC = drainTick.C
			}
		case state.Stopped, state.Failed:
			n.send(Status(statusOr(s.Detail, strings.ToLower(string(s.Phase)))))
			return true
		default:
			// The verdict /ready and the metrics give: READY with a hung
			// Envoy says so.
			v := s.Verdict()
			msg := []Field{Status(statusOr(v.Detail, fallbackStatus(v.Word)) + generations(opts.Generations))}
			if !readySent && settled(s.Phase) {
				readySent = true
				msg = append([]Field{Ready}, msg...)
			}
			n.send(msg...)
		}
		return false
	}

	for {
		select {
		case <-ctx.Done():
			// A change that raced the cancellation (often the final
			// STOPPED or FAILED) is still reported.
			select {
			case s := <-sub:
				handle(s)
			default:
			}
			return nil

		case s := <-sub:
			if handle(s) {
				return nil
			}

		case <-tickC:
			// A tick may be read late; judge by the clock, not its stamp.
			now := time.Now()
			if !now.Before(drainEnd) {
				// Past the promised end: stop extending so a wedged agent
				// is still killed by TimeoutStopSec.
				stopTick()
				continue
			}
			n.send(stopMessage(now, drainSnap, drainEnd, opts.StopGrace)...)
		}
	}
}

// settled reports whether the agent is up and supervising: Envoy is live,
// or the agent waits and retries by itself. Boot need not wait for more.
func settled(p state.Phase) bool {
	switch p {
	case state.Ready, state.NoZoneListener, state.WaitingForMesh, state.WaitingForControlPlane:
		return true
	}
	return false
}

func fallbackStatus(word string) string {
	if word == string(state.Ready) {
		return "Envoy ready"
	}
	return strings.ToLower(word)
}

// envoyOnly: s differs from prev only in what Envoy's admin answered.
func envoyOnly(prev, s state.Snapshot) bool {
	return s.Phase == prev.Phase && s.Detail == prev.Detail && s.Since.Equal(prev.Since) &&
		s.DrainDeadline.Equal(prev.DrainDeadline) && s.Envoy != prev.Envoy
}

// stopMessage is the progress line sent while terminating: how long systemd
// must wait for us and how much drain time is left.
func stopMessage(now time.Time, s state.Snapshot, drainEnd time.Time, grace time.Duration) []Field {
	if s.DrainDeadline.IsZero() {
		// Terminating without a drain wait: only Envoy's stop remains.
		return []Field{extendTimeout(grace), Status(statusOr(s.Detail, "stopping"))}
	}
	left := s.DrainDeadline.Sub(now)
	status := "stopping Envoy"
	if left > 0 {
		status = fmt.Sprintf("draining (%ds left)", int(math.Ceil(left.Seconds())))
	}
	return []Field{extendTimeout(drainEnd.Sub(now)), Status(status)}
}

func extendTimeout(d time.Duration) Field {
	return Field{"EXTEND_TIMEOUT_USEC", strconv.FormatInt(usec(d), 10)}
}

func usec(d time.Duration) int64 {
	if d < 0 {
		return 0
	}
	return d.Microseconds()
}

func statusOr(detail, fallback string) string {
	// A detail of several lines reads best on one; Message escapes the rest.
	detail = strings.TrimSpace(strings.ReplaceAll(detail, "\n", " "))
	if detail == "" {
		return fallback
	}
	return detail
}

// pingPeriod is a third of WatchdogSec: one failed check (an admin call
// that timed out once, Envoy's few milliseconds between two processes on
// an undrain) leaves two thirds of it, so only a lasting failure lets the
// watchdog fire. At half, one missed ping spent all of it.
func pingPeriod(interval time.Duration) time.Duration { return interval / 3 }

// watchdog pings every pingPeriod. Before Envoy runs (while the agent
// waits for the mesh or the control plane) the agent being alive is enough;
// once Envoy has started, a wedged or dead Envoy stops the pings so systemd
// restarts the unit.
func watchdog(ctx context.Context, n *notifier, interval time.Duration, envoyStarted *atomic.Bool, healthy func(context.Context) bool) {
	t := time.NewTicker(pingPeriod(interval))
	defer t.Stop()
	// Leave half of the ping period for the send itself.
	checkTimeout := pingPeriod(interval) / 2
	pinging := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok := true
		if healthy != nil && envoyStarted.Load() {
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			ok = healthy(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		if ok != pinging {
			pinging = ok
			if ok {
				n.log.Info("Envoy healthy again, resuming watchdog pings")
			} else {
				n.log.Warn("Envoy unhealthy, withholding watchdog pings", zap.Duration("watchdog", interval))
			}
		}
		if ok {
			n.send(Watchdog)
		}
	}
}

type notifier struct {
	log    *zap.Logger
	failed atomic.Bool
}

func (n *notifier) send(fields ...Field) {
	_, err := Notify(fields...)
	if err != nil {
		// Log once per failure streak; the socket may come back after a
		// systemd re-exec.
		if !n.failed.Swap(true) {
			n.log.Warn("sd_notify failed", zap.Error(err))
		}
		return
	}
	if n.failed.Swap(false) {
		n.log.Info("sd_notify works again")
	}
}

// ScrubEnv returns env without the variables that address systemd's notify
// socket, watchdog and socket activation, so a child (Envoy) can neither
// speak for the unit nor claim the agent's file descriptors.
func ScrubEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
			"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// generations is " [what gen says]", or "" when it says nothing.
func generations(gen func() string) string {
	if gen == nil {
		return ""
	}
	if g := gen(); g != "" {
		return " [" + g + "]"
	}
	return ""
}
