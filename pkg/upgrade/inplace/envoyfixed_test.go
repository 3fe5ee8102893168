package inplace

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// What a reload does with each setting changed alone: refuse it (only a
// restart applies it), hand Envoy over, or apply it in the agent. A new
// setting fails here until it is classified.
func TestReloadClassifiesEverySetting(t *testing.T) {
	const (
		restart  = "refused: a restart applies it"
		handover = "an Envoy handover"
		agent    = "the agent applies it"
	)
	want := map[string]string{
		"mesh": restart, "role": restart, "name": restart, "workload": restart, "label": restart, "address": restart,
		"ingress-port": restart, "egress-port": restart, "admin-port": restart, "cp-address": restart,
		"xds-relay": restart, "work-dir": restart,
		"envoy-binary": handover, "envoy-arg": handover, "concurrency": handover,
		"envoy-log-level": handover, "envoy-component-log-level": handover,
		"ca-cert-file": agent, "dataplane-token-file": agent, "dataplane-token": agent, "readiness-port": agent,
		"health-address": agent, "metrics-address": agent, "drain-time": agent, "drain-min": agent,
		"state-dir": agent, "cache-max-age": agent, "retry-initial": agent, "retry-max": agent,
		"bootstrap-timeout": agent, "log-level": agent, "log-format": agent,
	}
	base := func() *config.Config {
		return &config.Config{Mesh: "payments", Role: "egress", Labels: map[string]string{"a": "1"}, WorkDir: "/run/zp",
			XDSRelay: true, DrainTime: 30 * time.Second, EnvoyArgs: []string{"--x"}}
	}
	seen := 0
	for _, s := range config.Settings() {
		next := base()
		dst, ok := s.Field(next)
		if !ok {
			continue // another command's
		}
		seen++
		change(t, dst)
		got := agent
		switch {
		case len(identityChanges(EnvoyFixed(base()), EnvoyFixed(next))) > 0:
			got = restart
		case len(envoyFixedChanges(launchOf(base()), launchOf(next))) > 0:
			got = handover
		}
		if got != want[string(s.Key)] {
			t.Errorf("%s changed: %s, want %q", s.Key.Flag(), got, want[string(s.Key)])
		}
	}
	if seen != len(want) {
		t.Errorf("%d settings in the Config, %d classified here", seen, len(want))
	}
}

// A change names the flag; a handover's settings are no restart's.
func TestFixedChangesNameTheFlags(t *testing.T) {
	running := EnvoyFixed(&config.Config{Mesh: "a", Concurrency: 1, WorkDir: "/run/zp"})
	next := EnvoyFixed(&config.Config{Mesh: "b", Concurrency: 2, WorkDir: "/run/zp/"})
	if got := strings.Join(envoyFixedChanges(running, next), ", "); got != "--concurrency, --mesh" {
		t.Errorf("changes %q", got)
	}
	if got := strings.Join(identityChanges(running, next), ", "); got != "--mesh" {
		t.Errorf("restart needed for %q", got)
	}
}

// change gives the field behind dst another value.
func change(t *testing.T, dst any) {
	switch d := dst.(type) {
	case *string:
		*d += "/other"
	case *int:
		*d++
	case *bool:
		*d = !*d
	case *time.Duration:
		*d += time.Second
	case *map[string]string:
		*d = map[string]string{"other": "1"}
	case *[]string:
		*d = append(*d, "other")
	default:
		t.Fatalf("no change for %T", dst)
	}
}
