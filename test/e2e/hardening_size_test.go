package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

var tooLargeCount = regexp.MustCompile(`zoneproxy_xds_responses_rejected_total\{reason="too_large"\} (\d+)`)

// A control plane that sends a 200 MB response: the agent neither relays
// nor keeps it, says so, and its memory stays small while it asks again.
func TestA200MBResponseIsRefusedAndNotKept(t *testing.T) {
	t.Parallel()
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, PadClusterBytes: 200 << 20})
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitLog("the control plane sent a response larger than the relay accepts", promptly)
	harness.Eventually(t, promptly, "three refusals, each at the relay's backoff", func() bool {
		m := tooLargeCount.FindStringSubmatch(agentMetrics(t, p.Readiness))
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 3
	})
	if code, word := harness.Readiness(p.Readiness); code == 200 {
		t.Fatalf("/ready %d %s on a configuration that never reached Envoy", code, word)
	}
	rss := vmRSSKiB(t, agent.PID())
	t.Logf("agent VmRSS %d MiB after three 200 MB responses", rss>>10)
	if rss > 200<<10 {
		t.Fatalf("agent VmRSS %d MiB: the oversized response was kept", rss>>10)
	}
}

func vmRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
