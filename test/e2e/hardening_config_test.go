package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Values no restart can fix are configuration errors (exit 78) said at
// once, naming the setting and the limit, where the agent used to retry
// for ever (a port no dial can use) or start an Envoy that refused them
// every 5 s (a drain longer than Envoy's 32-bit --drain-time-s).
func TestHardeningValuesNoRestartCanFix(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	cases := []struct {
		name  string
		extra []string
		says  string
	}{
		{"a port above 65535", []string{"--cp-address", "https://127.0.0.1:99999"}, `--cp-address: "https://127.0.0.1:99999": 99999 is not a port: use 1-65535`},
		{"port 0", []string{"--cp-address", "https://127.0.0.1:0"}, `--cp-address: "https://127.0.0.1:0": 0 is not a port: use 1-65535`},
		{"a drain longer than Envoy takes", []string{"--drain-time", "2000000h"}, "--drain-time: 2000000h0m0s is longer than Envoy accepts: its --drain-time-s is at most 4294967295 seconds"},
		{"more workers than Envoy takes", []string{"--concurrency", "4294967296"}, "--concurrency: 4294967296 is more than Envoy's --concurrency accepts (at most 4294967295)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := zone.NewProxy("payments", "egress")
			start := time.Now()
			code, out := harness.Run(t, bins.Zoneproxy, nil, append(zone.Args(p), tc.extra...)...)
			if code != 78 || !strings.Contains(out, tc.says) {
				t.Fatalf("exit %d after %s, want 78 saying %q\n%s", code, time.Since(start), tc.says, out)
			}
		})
	}
}

// A value a config file gives can be a whole file's worth (five 1 MiB
// values, within the file's 8 MiB): the agent says what is wrong without
// repeating it whole.
func TestHardeningAnOverLongValueIsNotEchoed(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	long := strings.Repeat("a", 1<<20)
	cfg := filepath.Join(harness.ShortTempDir(t), "zoneproxy.yaml")
	yaml := "role: " + long + "\nworkload: " + long + "\nenvoy-log-level: " + long + "\ndrain-time: " + long + "\nreadiness-port: " + long + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--config", cfg, "--mesh", "payments", "--address", "127.0.0.1", "--cp-address", zone.CP.URL(),
		"--ca-cert-file", zone.CP.CACertFile(), "--dataplane-token-file", p.TokenFile, "--work-dir", p.WorkDir, "--state-dir", p.StateDir}
	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if code != 78 || len(out) > 16<<10 {
		t.Fatalf("exit %d, %d bytes of output:\n%.3000s", code, len(out), out)
	}
	for _, w := range []string{"--role: ", "--workload: ", "--envoy-log-level: ", "--drain-time: ", "--readiness-port: ", "…(1048576 bytes)"} {
		if !strings.Contains(out, w) {
			t.Errorf("the output does not say %q:\n%s", w, out)
		}
	}
}

// An expired --ca-cert-file is named as such, with its date, not blamed
// on the control plane's certificate: a configuration error on a
// synchronised clock, a warning on one that may be wrong (the kernel says
// which this machine shows).
func TestHardeningExpiredCAFile(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	notAfter := time.Now().Add(-time.Hour).Truncate(time.Second)
	ca := filepath.Join(harness.ShortTempDir(t), "ca.pem")
	if err := os.WriteFile(ca, testutil.CertPEM(t, notAfter), 0o644); err != nil {
		t.Fatal(err)
	}
	expired := `its CA certificate "zp" expired at ` + notAfter.UTC().Format(time.RFC3339)
	args := append(zone.Args(p), "--ca-cert-file", ca)
	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if strings.Contains(out, "the control plane's certificate expired") {
		t.Fatalf("the CA file is blamed on the control plane:\n%s", out)
	}
	if timesync.Check().Synced {
		if want := "--ca-cert-file: " + ca + ": " + expired; code != 78 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want 78 saying %q\n%s", code, want, out)
		}
		return
	}
	// A warning; the control plane's certificate, which this file did not
	// sign, is then refused (78) as from any wrong CA.
	if want := "the system clock is not synchronised (NTP); " + ca + " looks unusable: " + expired; !strings.Contains(out, want) {
		t.Fatalf("exit %d, want a warning saying %q\n%s", code, want, out)
	}
}

// The token file's warnings are about who can read or replace it: 0640
// with the agent's own group draws none; a file another user owns does.
func TestHardeningTokenFileOwnership(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	if err := os.Chmod(p.TokenFile, 0o640); err != nil { // group: the agent's own (the test's)
		t.Fatal(err)
	}
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if out := agent.Output(); strings.Contains(out, "credential") {
		t.Fatalf("a warning for 0640 with the agent's group:\n%s", out)
	}

	agent.Signal(syscall.SIGTERM) // the next one has the same name
	agent.Wait(promptly)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the token file to another user")
	}
	q := zone.NewProxy("payments", "egress")
	if err := os.Chown(q.TokenFile, 65534, os.Getegid()); err != nil {
		t.Fatal(err)
	}
	other := zone.Start(q, nil)
	other.AwaitLog(q.TokenFile+" is owned by ", promptly)
	other.AwaitLog("that user can replace this credential; chown it to root", promptly)
	other.AwaitReadiness(q.Readiness, 200, "READY", promptly)
}
