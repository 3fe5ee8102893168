package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Without a cached version, the agent opens its connection to the control
// plane while `envoy --version` runs: this Envoy answers --version only
// once it sees that connection established (or gives up after 10 s).
func TestVersionRunsWhileTheControlPlaneConnectionOpens(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	_, port, err := net.SplitHostPort(strings.TrimPrefix(zone.CP.URL(), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	dir := harness.ShortTempDir(t)
	wrapper := filepath.Join(dir, "envoy")
	// /proc/net/tcp: "sl local rem st", rem as hex IP:PORT, st 01 = established.
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = --version ]; then
  i=0
  while [ $i -lt 1000 ]; do
    if cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -Eq ' [0-9A-F]+:%04X 01 '; then exec %s --version; fi
    sleep 0.01; i=$((i+1))
  done
  echo "no connection to the control plane while --version ran" >&2
  exit 1
fi
exec %s "$@"
`, n, bins.Envoy, bins.Envoy)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil, "--envoy-binary", wrapper)
	agent.AwaitLog("started Envoy", 30*time.Second)
	if strings.Contains(agent.Output(), "no connection to the control plane") {
		t.Fatalf("--version ran without a connection to the control plane open\n%s", agent.Output())
	}
	if !strings.Contains(agent.Output(), `"version-cached": false`) {
		t.Fatalf("want a first start (no cached version)\n%s", agent.Output())
	}
	if len(zone.CP.BootstrapRequests()) != 1 {
		t.Fatalf("%d bootstrap requests, want 1", len(zone.CP.BootstrapRequests()))
	}
}
