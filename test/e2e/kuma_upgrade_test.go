package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// kumaUpgradeDown is how long the control plane is gone while it is
// replaced by the other release.
const kumaUpgradeDown = 2 * time.Second

// liveWithin is the promise: live configuration within this long of the
// new control plane answering.
const liveWithin = 30 * time.Second

// Across kuma-cp's upgrade from 2.14 to 3.0 (same address, CA and token
// key, store rebuilt), a running zone proxy bootstrapped by 2.14 (state
// of the world) gets live configuration from 3.0 (delta only) with no
// restart: under 100 connections a second none is refused or reset, /ready
// stays 200, a change made on 3.0 reaches Envoy, and /status, the journal
// and a metric say what happened. 3.0 refuses state of the world as an
// unknown method; kuma-cp master accepts it and never answers: both.
func TestKumaCPUpgradeTo30GivesLiveConfigurationWithoutARestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role          string
		neverAnswered bool
	}{
		{"egress", false},
		{"ingress", false},
		{"egress", true},
	} {
		name := tc.role + "/refused"
		if tc.neverAnswered {
			name = tc.role + "/never-answered"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: controlplane.Kuma214, SotWNeverAnswered: tc.neverAnswered})
			run := acrossKumaChange(t, zone, tc.role, controlplane.Kuma30)
			if run.protocol != controlplane.ProtocolDelta || !run.compatible {
				t.Errorf("kuma-cp 3.0 has the proxy's stream over %q, kumaCpCompatible %t; want delta, compatible", run.protocol, run.compatible)
			}
			// Whichever tells the agent first says it: the refused (or
			// unanswered) stream, or the check of a control plane back from
			// its outage, which finds 3.0's bootstrap.
			said := ""
			for _, why := range []string{
				"kuma-cp no longer serves state-of-the-world ADS (Kuma 3.0)",
				"kuma-cp's bootstrap asks for delta ADS (Kuma 3.0) where Envoy speaks state-of-the-world",
			} {
				if strings.HasPrefix(run.status.Says, why) {
					said = why
				}
			}
			if said == "" || run.status.State != "done" {
				t.Errorf("/status protocolChange %+v, want done, saying that kuma-cp 3.0 wants delta ADS", run.status)
			}
			if !strings.Contains(run.output, said+"; handing over to an Envoy started from its new bootstrap") {
				t.Error("the journal does not say what the agent does")
			}
			if strings.Contains(run.status.Says, "unreachable") {
				t.Errorf("/status calls a control plane that answers unreachable: %q", run.status.Says)
			}
			if m := agentMetrics(t, run.proxy.Readiness); !strings.Contains(m, `zoneproxy_xds_protocol_changes_total{result="success",to="delta"} 1`) {
				t.Errorf("the metric does not count the change:\n%s", m)
			}
		})
	}
}

// The way back: kuma-cp 3.0 rolled back to 2.14. 2.14 serves delta too,
// but counts a delta proxy's kumaDp version (3.0.0) as another major's;
// its bootstrap asks for state of the world, so the agent hands over to
// an Envoy started from it, as a start on 2.14 would run.
func TestKumaCPRollbackTo214GivesLiveConfigurationWithoutARestart(t *testing.T) {
	t.Parallel()
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: controlplane.Kuma30})
	run := acrossKumaChange(t, zone, "egress", controlplane.Kuma214)
	if run.protocol != controlplane.ProtocolSotW || !run.compatible {
		t.Errorf("kuma-cp 2.14 has the proxy's stream over %q, kumaCpCompatible %t; want SotW, compatible", run.protocol, run.compatible)
	}
	if want := "kuma-cp's bootstrap asks for state-of-the-world ADS (Kuma 2.14) where Envoy speaks delta"; !strings.HasPrefix(run.status.Says, want) || run.status.State != "done" {
		t.Errorf("/status protocolChange %+v, want done, saying %q", run.status, want)
	}
}

// kumaChangeRun is what acrossKumaChange saw.
type kumaChangeRun struct {
	proxy      harness.Proxy
	output     string
	status     struct{ State, Says string }
	protocol   string // of the proxy's stream on the new control plane
	compatible bool
}

// acrossKumaChange runs a zone proxy of role on zone, replaces its
// control plane by release `to` under load, and checks that a change made
// there reaches Envoy within liveWithin, with no failed connection and
// /ready 200 throughout.
func acrossKumaChange(t *testing.T, zone *harness.Zone, role, to string) kumaChangeRun {
	t.Helper()
	name := "zp-kuma-" + role
	p, agent := namedProxy(t, zone, "payments", role, name, "--drain-time", "1s", "--drain-min", "300ms")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if role == "egress" {
		agent.AwaitLog(egressRegisteredLog, promptly) // settled: kuma-cp took it
	}
	awaitCached(t, p)
	node := "payments." + name
	oldPID, _ := envoyOf(t, p)

	load := startLoadOn(100, zoneTarget(p, role))
	ready := watch(20*time.Millisecond, readyProbe(p))
	if err := zone.CP.Upgrade(to, kumaUpgradeDown); err != nil {
		t.Fatal(err)
	}
	answering := time.Now()
	// A change made on the new control plane: a cluster Envoy did not have.
	if err := zone.CP.SetMeshMetric("payments", name, "after-upgrade", controlplane.MeshMetric{
		Backends: []controlplane.MetricsBackend{{Type: "OpenTelemetry", OpenTelemetry: &controlplane.OpenTelemetryBackend{
			Name: "after-upgrade", Endpoint: controlplane.OTelEndpoint{Address: "127.0.0.1", Port: 9}, RefreshInterval: "1s",
		}}},
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, liveWithin, "the new control plane's change in Envoy's config_dump", func() bool {
		_, dump, err := harness.EnvoyAdmin(p.WorkDir, "GET", "/config_dump")
		return err == nil && strings.Contains(dump, "system_meshmetric_otel_after-upgrade")
	})
	live := time.Since(answering)
	var run kumaChangeRun
	harness.Eventually(t, promptly, "/status to say the handover is done", func() bool {
		_, body := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/status")
		var st struct{ ProtocolChange struct{ State, Says string } }
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("/status %q: %v", body, err)
		}
		run.status = st.ProtocolChange
		return st.ProtocolChange.State == "done"
	})
	harness.Eventually(t, promptly, "the old Envoy to exit after its drain", func() bool { return harness.ProcessGone(oldPID) })
	if _, dump, err := harness.EnvoyAdmin(p.WorkDir, "GET", "/config_dump"); err != nil || !strings.Contains(dump, "system_meshmetric_otel_after-upgrade") {
		t.Errorf("the Envoy that took over lacks the new control plane's change (%v)", err)
	}
	harness.Eventually(t, promptly, "kuma-cp to count the proxy connected", func() bool {
		for _, px := range zone.CP.Proxies() {
			if px.NodeID == node && px.Connected {
				run.protocol, run.compatible = px.Protocol, px.KumaCpCompatible
				return true
			}
		}
		return false
	})
	tries, probes := checkLoad(t, agent, load, ready)
	t.Logf("kuma-cp %s: live configuration %s after it answered; %d connections, %d /ready probes", to, live.Round(time.Millisecond), tries, probes)
	run.proxy, run.output = p, agent.Output()
	return run
}
