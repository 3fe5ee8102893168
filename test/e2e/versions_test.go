package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/version"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

type reportedVersions struct {
	Version struct {
		KumaDp struct {
			Version string `json:"version"`
			GitTag  string `json:"gitTag"`
		} `json:"kumaDp"`
		Envoy struct {
			Version          string `json:"version"`
			KumaDpCompatible bool   `json:"kumaDpCompatible"`
		} `json:"envoy"`
	} `json:"version"`
	DynamicMetadata map[string]string `json:"dynamicMetadata"`
}

// kuma-cp judges kumaDp.version against its own release and shows the
// versions in the DataplaneInsight: the agent reports the Kuma release it
// speaks for, Envoy's compatibility, and its own version beside them.
func TestVersionsReportedToTheControlPlane(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		envoyOut   string // the stand-in's --version output; "" = its own (1.39.0)
		envoy      string
		compatible bool
	}{
		{name: "the Envoy Kuma expects", envoy: "1.39.0", compatible: true},
		{name: "another Envoy minor", envoyOut: "\nenvoy  version: 0123456789abcdef0123456789abcdef01234567/1.38.4/Clean/RELEASE/BoringSSL\n", envoy: "1.38.4", compatible: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			if tt.envoyOut != "" {
				env = []string{"ENVOY_STANDIN_VERSION_OUTPUT=" + tt.envoyOut}
			}
			zone := harness.NewZone(t, bins, "payments")
			p := zone.NewProxy("payments", "egress")
			agent := zone.Start(p, env)
			harness.Eventually(t, 20*time.Second, "a bootstrap request", func() bool { return len(zone.CP.BootstrapRequests()) > 0 })
			var got reportedVersions
			if err := json.Unmarshal(zone.CP.BootstrapRequests()[0].Body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Version.KumaDp.Version != version.Newest().Kuma || !strings.HasPrefix(got.Version.KumaDp.GitTag, "zoneproxy-") {
				t.Errorf("kumaDp %+v, want version %s and a zoneproxy- tag", got.Version.KumaDp, version.Newest().Kuma)
			}
			if got.DynamicMetadata["version.dependencies.zoneproxy"] == "" {
				t.Errorf("dynamicMetadata %v lacks zoneproxy's own version", got.DynamicMetadata)
			}
			if got.Version.Envoy.Version != tt.envoy || got.Version.Envoy.KumaDpCompatible != tt.compatible {
				t.Errorf("envoy %+v, want %s compatible=%v", got.Version.Envoy, tt.envoy, tt.compatible)
			}
			warned := strings.Contains(agent.Output(), "is not a version the supported Kuma releases")
			if warned == tt.compatible {
				t.Errorf("incompatibility warning shown = %v\n%s", warned, agent.Output())
			}
		})
	}
}

// The version cache is keyed on --envoy-binary's file. Behind a wrapper
// that execs Envoy, an upgraded Envoy leaves that file as it was, and the
// start after the upgrade tells the control plane the old build. The
// running Envoy reports its own: the agent says so, and the start after
// that tells the control plane the new build.
func TestVersionCacheLearnsAnEnvoyUpgradedBehindAWrapper(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	wrapper := envoyWrapper(t, harness.ShortTempDir(t), ":")
	const oldEnvoy = "\nenvoy  version: 0123456789abcdef0123456789abcdef01234567/1.38.4/Clean/RELEASE/BoringSSL\n"
	const warning = "the running Envoy reports another build"
	start := func(env []string) *harness.Agent {
		t.Helper()
		agent := zone.Start(p, env, "--envoy-binary", wrapper)
		agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
		return agent
	}
	stop := func(agent *harness.Agent) {
		t.Helper()
		agent.Signal(syscall.SIGTERM)
		if code := agent.Wait(promptly); code != 0 {
			t.Fatalf("exit %d\n%s", code, agent.Output())
		}
	}
	told := func(i int) string {
		t.Helper()
		var got reportedVersions
		if err := json.Unmarshal(zone.CP.BootstrapRequests()[i].Body, &got); err != nil {
			t.Fatal(err)
		}
		return got.Version.Envoy.Version
	}

	agent := start([]string{"ENVOY_STANDIN_VERSION_OUTPUT=" + oldEnvoy})
	stop(agent)
	if told(0) != "1.38.4" || strings.Contains(agent.Output(), warning) {
		t.Fatalf("before the upgrade: told %s, want 1.38.4 without a warning\n%s", told(0), agent.Output())
	}

	agent = start(nil) // the stand-in's own build, 1.39.0, behind the same wrapper
	agent.AwaitLog(warning, promptly)
	stop(agent)
	if told(1) != "1.38.4" {
		t.Fatalf("first start after the upgrade: told %s, want the cached 1.38.4", told(1))
	}

	agent = start(nil)
	stop(agent)
	if told(2) != "1.39.0" || strings.Contains(agent.Output(), warning) {
		t.Fatalf("second start after the upgrade: told %s, want 1.39.0 without a warning\n%s", told(2), agent.Output())
	}
}
