package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// After a run cached its configuration, check says whether run would serve
// it during an outage, and why not when it would not.
func TestCheckReportsTheCachedConfiguration(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	damaged := filepath.Join(zone.Dir, "damaged-state")
	b, err := os.ReadFile(cacheFile(p))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.MkdirAll(filepath.Join(damaged, "xds"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(damaged, "xds", "xds-lkg"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(zone.Dir, "empty-state")

	tests := []struct {
		name  string
		extra []string
		want  []string
	}{
		{name: "usable", want: []string{"[ ok ] cached configuration in " + cacheFile(p), "made for this proxy",
			"served only while the control plane is unreachable"}},
		{name: "too old", extra: []string{"--cache-max-age", "1ms"}, want: []string{"[note] cached configuration in " + cacheFile(p),
			"it would not be served: the cached configuration is", "older than --cache-max-age 1ms"}},
		{name: "another proxy", extra: []string{"--name", "another-egress"}, want: []string{`made for mesh "payments", name "zone-proxy-payments-egress-`,
			"it would not be served: made for another proxy or control plane"}},
		{name: "damaged", extra: []string{"--state-dir", damaged}, want: []string{"[note] cached configuration in " + damaged, "would not be served: damaged"}},
		{name: "none yet", extra: []string{"--state-dir", empty}, want: []string{"[note] no cached configuration in " + empty + "/xds/xds-lkg yet"}},
		{name: "state dir off", extra: []string{"--state-dir", ""}, want: []string{`[note] no configuration is cached: --state-dir is ""`}},
		{name: "direct mode", extra: []string{"--xds-relay=false"}, want: []string{"[note] no configuration is cached: --xds-relay=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := zone.Args(p, tt.extra...)
			args[0] = "check"
			code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
			// The cache fails nothing: run works without one.
			if code != 0 && tt.name != "another proxy" {
				t.Errorf("exit %d", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
