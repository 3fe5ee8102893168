package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Envoy at debug level dumps the ADS request headers, the dataplane token
// in authorization among them; the agent passes Envoy's log on, redacted.
func TestEnvoysHeaderDumpReachesTheLogRedacted(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	b, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	signature := token[strings.LastIndexByte(token, '.')+1:]

	// Direct mode: through the relay Envoy never holds the token at all.
	agent := zone.Start(p, []string{"ENVOY_STANDIN_DUMP_ADS_HEADERS=1"}, "--xds-relay=false", "--envoy-log-level", "debug", "--log-level", "debug")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	agent.AwaitLog("'authorization', '", promptly)
	out := agent.Output()
	if strings.Contains(out, token) || strings.Contains(out, signature) {
		t.Fatal("the dataplane token is in the agent's output")
	}
	if !strings.Contains(out, "'authorization', '[redacted]'") {
		t.Fatal("the header dump does not show the value as [redacted]")
	}
}
