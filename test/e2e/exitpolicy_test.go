package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Exit 78 is final under systemd: answers a restart could outlive must be
// waited out instead.

// generously bounds what should happen soon; another suite may share the cores.
const generously = 30 * time.Second

func TestThrottledBootstrapWaitsForRetryAfterThenProceeds(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	zone.CP.SetFaults(controlplane.Faults{BootstrapStatus: 429, BootstrapRetryAfter: "2"})
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil) // --retry-max 200ms: only Retry-After explains a 2s pause
	agent.AwaitLog("answered 429", generously)
	if out := agent.Output(); !strings.Contains(out, "fault injected: status 429") {
		t.Fatalf("the wait message does not show the body that came back:\n%s", out)
	}
	zone.CP.SetFaults(controlplane.Faults{})
	agent.AwaitReadiness(p.Readiness, 200, "READY", generously)
	if agent.Exited() {
		t.Fatal("the agent exited instead of waiting")
	}
	recs := zone.CP.BootstrapRequests()
	if len(recs) < 2 || recs[0].Status != 429 {
		t.Fatalf("bootstrap requests: %+v", recs)
	}
	if gap := recs[1].At.Sub(recs[0].At); gap < 2*time.Second {
		t.Fatalf("retried %s after a 429 with Retry-After: 2", gap)
	}
}

func TestRefusalByAProxyInFrontIsRetried(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	zone.CP.SetFaults(controlplane.Faults{BootstrapStatus: 403}) // a body kuma-cp never sends
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitLog("answered 403", generously)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_CONTROL_PLANE", generously)
	if out := agent.Output(); !strings.Contains(out, "fault injected: status 403") || !strings.Contains(out, "proxy or load balancer") {
		t.Fatalf("the wait message does not show what answered:\n%s", out)
	}
	zone.CP.SetFaults(controlplane.Faults{})
	agent.AwaitReadiness(p.Readiness, 200, "READY", generously)
	if agent.Exited() {
		t.Fatal("the agent exited instead of retrying")
	}
}

func TestTokenFileRotatedInPlaceWhileWaiting(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins) // no mesh yet: the agent waits
	p := zone.NewProxy("payments", "egress")
	token, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", generously)

	if err := os.WriteFile(p.TokenFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	agent.AwaitLog(p.TokenFile+" is empty", generously)
	if err := os.Remove(p.TokenFile); err != nil {
		t.Fatal(err)
	}
	agent.AwaitLog("cannot read "+p.TokenFile, generously)
	if err := os.WriteFile(p.TokenFile, token, 0o600); err != nil {
		t.Fatal(err)
	}
	zone.CP.CreateMesh("payments")
	agent.AwaitReadiness(p.Readiness, 200, "READY", generously)
	if agent.Exited() {
		t.Fatal("the agent exited instead of waiting for the token file")
	}
	if out := agent.Output(); strings.Contains(out, strings.TrimSpace(string(token))) {
		t.Fatal("the token appears in the log")
	}
}
