package e2e

import (
	"encoding/json"
	"strings"
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
			if got.Version.KumaDp.Version != version.Kuma || !strings.HasPrefix(got.Version.KumaDp.GitTag, "zoneproxy-") {
				t.Errorf("kumaDp %+v, want version %s and a zoneproxy- tag", got.Version.KumaDp, version.Kuma)
			}
			if got.DynamicMetadata["version.dependencies.zoneproxy"] == "" {
				t.Errorf("dynamicMetadata %v lacks zoneproxy's own version", got.DynamicMetadata)
			}
			if got.Version.Envoy.Version != tt.envoy || got.Version.Envoy.KumaDpCompatible != tt.compatible {
				t.Errorf("envoy %+v, want %s compatible=%v", got.Version.Envoy, tt.envoy, tt.compatible)
			}
			warned := strings.Contains(agent.Output(), "is not the version Kuma")
			if warned == tt.compatible {
				t.Errorf("incompatibility warning shown = %v\n%s", warned, agent.Output())
			}
		})
	}
}
