package xds

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

func TestServingDetailSaysWhyTheCacheServes(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		s       StreamState
		want    string
		without string
	}{
		{"from the control plane", StreamState{}, "Envoy ready", "cached"},
		{"cache, control plane away", StreamState{Cached: CacheState{InUse: true, WrittenAt: at, Since: at.Add(time.Hour)}},
			"serving the cached configuration of 2026-11-20T08:00:00Z since 2026-11-20T09:00:00Z: the control plane is unreachable", ""},
		{"cache, control plane refusing", StreamState{Cached: CacheState{InUse: true, WrittenAt: at, Since: at}, Refusal: "authentication failed: token expired"},
			"the control plane refuses the configuration stream: authentication failed: token expired", "unreachable"},
		{"cache after a restart", StreamState{Cached: CacheState{InUse: true, Held: true, WrittenAt: at, Since: at}, Refusal: "there is already an active stream from this node, try again later"},
			"kuma-cp still holds the stream of this proxy's previous run (expected after a restart)", "unreachable"},
		{"cache, another proxy with this name", StreamState{Cached: CacheState{InUse: true, Held: true, WrittenAt: at, Since: at}, Upstream: Upstream{State: AnotherProxy}},
			"another zone proxy runs with this --name", "expected after a restart"},
	}
	for _, tt := range tests {
		got := tt.s.ServingDetail()
		if !strings.Contains(got, tt.want) || (tt.without != "" && strings.Contains(got, tt.without)) {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
}

// /status says in words what kuma-cp makes of the proxy, for every state
// the relay reports.
func TestControlPlaneWordsForEveryState(t *testing.T) {
	tests := []struct {
		state   UpstreamState
		relayed bool
		want    string
	}{
		{Connected, true, "its Dataplane is registered"},
		{Held, true, "registers it anew from this proxy's next stream"},
		{AnotherProxy, true, "another zone proxy runs with this --name"},
		{Unreachable, true, "does not answer"},
		{Refused, true, "refused this proxy's stream: authentication failed"},
		{Withdrawn, true, "egress listener NotReady"},
		{"", true, "no stream yet"},
		{"", false, "--xds-relay=false"},
	}
	for _, tt := range tests {
		if got := ControlPlaneWords(tt.state, tt.relayed, "authentication failed"); !strings.Contains(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.state, got, tt.want)
		}
	}
}

// A restart for a bind failure asks whether a new Envoy would get a
// configuration at once.
func TestNewEnvoyConfigured(t *testing.T) {
	tests := []struct {
		upstream UpstreamState
		cached   bool
		want     bool
	}{
		{Connected, false, true},
		{Unreachable, true, true},
		{Held, true, true},
		{Unreachable, false, false},
		{Refused, false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		s := StreamState{Upstream: Upstream{State: tt.upstream}, Cached: CacheState{InUse: tt.cached}}
		if got := s.NewEnvoyConfigured(); got != tt.want {
			t.Errorf("%q, cached %v: %v, want %v", tt.upstream, tt.cached, got, tt.want)
		}
	}
}

// Each of the relay's events, in turn, as the agent sees it: the stream's
// state, what it shows while Envoy waits, whether READY's words are asked
// again, and what is logged.
func TestRelayEventsBecomeStateAndWords(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	served := CacheState{InUse: true, WrittenAt: at, Since: at}
	tests := []struct {
		name     string
		before   StreamState
		event    func(w *watch)
		want     StreamState
		waiting  string // "" if Envoy is not said to wait
		restated bool
		logged   string
	}{
		{name: "a refusal: the control plane's words", event: func(w *watch) {
			w.streamError(relay.StreamError{Message: "authentication failed"})
		}, want: StreamState{Refusal: "authentication failed"},
			waiting: "the control plane refused Envoy's configuration stream: authentication failed", restated: true},
		{name: "a refusal the relay retries is not shown", event: func(w *watch) {
			w.streamError(relay.StreamError{Message: "busy", Retrying: true})
		}},
		{name: "unreachable: the relay retries, the cache may serve", event: func(w *watch) {
			w.streamError(relay.StreamError{Message: "connection refused", Unreachable: true})
		}},
		{name: "the token file being rotated reached no control plane", event: func(w *watch) {
			w.streamError(relay.StreamError{Message: "cannot read", Local: true})
		}},
		{name: "held after a restart, nothing cached", event: func(w *watch) {
			w.streamError(relay.StreamError{Message: "already an active stream", Held: true, Retrying: true})
		}, waiting: "no cached configuration to serve meanwhile: " + HeldWords},
		{name: "held for longer than any delay: another proxy", before: StreamState{Upstream: Upstream{State: AnotherProxy}},
			event: func(w *watch) {
				w.streamError(relay.StreamError{Message: "already an active stream", Held: true, Retrying: true})
			}, want: StreamState{Upstream: Upstream{State: AnotherProxy}}, waiting: AnotherProxyWords},
		{name: "the cache serves", event: func(w *watch) { w.cachedConfig(served) },
			want: StreamState{Cached: served}, restated: true, logged: "Envoy serves the last-known-good configuration"},
		{name: "the cache serves after a restart: the relay said so", event: func(w *watch) {
			w.cachedConfig(CacheState{InUse: true, Held: true, WrittenAt: at, Since: at})
		}, want: StreamState{Cached: CacheState{InUse: true, Held: true, WrittenAt: at, Since: at}}, restated: true},
		{name: "the control plane is back: its refusal is over", before: StreamState{Cached: served, Refusal: "authentication failed"},
			event: func(w *watch) { w.cachedConfig(CacheState{}) }, restated: true, logged: "the control plane is back"},
		{name: "the upstream's state", event: func(w *watch) { w.upstreamChanged(Upstream{State: Connected, Since: at}) },
			want: StreamState{Upstream: Upstream{State: Connected, Since: at}}, restated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			var waiting string
			restated := false
			w := &watch{log: zap.New(core), st: tt.before, hooks: Hooks{
				Waiting: func(why string) { waiting = why }, ServingChanged: func() { restated = true },
			}}
			tt.event(w)
			if got := w.state(); got != tt.want {
				t.Errorf("state %+v, want %+v", got, tt.want)
			}
			if waiting != tt.waiting {
				t.Errorf("waiting %q, want %q", waiting, tt.waiting)
			}
			if restated != tt.restated {
				t.Errorf("READY's words asked again: %v, want %v", restated, tt.restated)
			}
			if all := logs.All(); (tt.logged == "") != (len(all) == 0) || (tt.logged != "" && !strings.Contains(all[0].Message, tt.logged)) {
				t.Errorf("logged %v, want %q", all, tt.logged)
			}
		})
	}
}

// Hooks the agent leaves out are not called.
func TestRelayEventsWithoutHooks(t *testing.T) {
	w := &watch{log: zap.NewNop()}
	w.streamError(relay.StreamError{Message: "refused"})
	w.streamError(relay.StreamError{Held: true})
	w.cachedConfig(CacheState{InUse: true})
	w.upstreamChanged(Upstream{State: Refused})
	if got := w.state(); got.Refusal != "refused" || !got.Cached.InUse || got.Upstream.State != Refused {
		t.Errorf("state %+v", got)
	}
}
