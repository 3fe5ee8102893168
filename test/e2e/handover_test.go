package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// handOver asks the agent for an Envoy handover and returns its answer.
func handOver(t *testing.T, p harness.Proxy) (int, string) {
	t.Helper()
	resp, err := http.Post("http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/envoy/handover", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// envoyOf is the Envoy /status names: its pid and generation.
func envoyOf(t *testing.T, p harness.Proxy) (pid int, generation int) {
	t.Helper()
	_, body := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/status")
	var st struct{ Envoy struct{ PID, Generation int } }
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status %q: %v", body, err)
	}
	return st.Envoy.PID, st.Envoy.Generation
}

// handoverProbe fails on an egress connection that fails (a TLS
// ClientHello, as a sidecar sends) or a /ready that is not 200.
func handoverProbe(p harness.Proxy) func() error {
	egress := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Egress))
	return func() error {
		var failure string
		if c, err := harness.DialTLSHello(egress, controlplane.DestinationSNI(p.Mesh, "egress")); err != nil {
			failure = "egress: " + err.Error()
		} else {
			c.Close()
		}
		if code, word := harness.Readiness(p.Readiness); code != 200 {
			failure += " /ready: " + strconv.Itoa(code) + " " + word
		}
		if failure != "" {
			return errors.New(failure)
		}
		return nil
	}
}

// An Envoy handover: a new Envoy takes over beside the old one. Clients
// see no refused or reset connection and /ready stays 200; a connection
// held open before stays usable until the old Envoy exits after its
// drain; kuma-cp sees one stream throughout and keeps the Dataplane.
func TestEnvoyHandoverDropsNoConnection(t *testing.T) {
	t.Parallel()
	const drainTime = 3 * time.Second
	zone, p, agent := readyEgress(t, nil, "--drain-time", drainTime.String(), "--drain-min", "1s")
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name
	before := zone.CP.NodeStream(node)
	held := zone.HoldConnection(p, "egress")
	oldPID, gen := envoyOf(t, p)
	if gen != 1 || oldPID != agent.EnvoyPID(promptly) {
		t.Fatalf("/status names Envoy %d generation %d", oldPID, gen)
	}

	from := time.Now()
	w := watch(5*time.Millisecond, handoverProbe(p))
	code, body := handOver(t, p)
	handedOver := time.Now()
	if code != 200 || !strings.Contains(body, "generation 2") {
		t.Fatalf("POST /envoy/handover: %d %q\n%s", code, body, agent.Output())
	}
	newPID, gen := envoyOf(t, p)
	if gen != 2 || newPID == oldPID || newPID == 0 {
		t.Fatalf("after the handover /status names Envoy %d generation %d (old %d)", newPID, gen, oldPID)
	}
	if !stillOpen(held) || harness.ProcessGone(oldPID) {
		t.Fatal("the old Envoy or its open connection is gone before its drain")
	}
	harness.Eventually(t, promptly, "the old Envoy to exit after its drain", func() bool { return harness.ProcessGone(oldPID) })
	if took := time.Since(handedOver); took < drainTime-500*time.Millisecond {
		t.Errorf("the old Envoy exited %s after the handover with a connection open, before the drain time %s", took, drainTime)
	}
	if stillOpen(held) {
		t.Error("the held connection outlived the old Envoy")
	}
	harness.Eventually(t, promptly, "traffic on the new Envoy alone", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n > 50
	})
	tries, failures := w.finish()
	if failures = withoutKernelResets(t, failures, agent.Output()); len(failures) > 0 {
		t.Errorf("%d of %d tries failed during the handover:\n%s", len(failures), tries, strings.Join(failures, "\n"))
	}
	if code, body := readinessBody(t, p); code != 200 || !strings.Contains(body, "Envoy generation 2") {
		t.Errorf("/ready %d %q, want READY naming generation 2", code, body)
	}

	after := zone.CP.NodeStream(node)
	if after.Accepted != before.Accepted || after.ActiveStream != before.ActiveStream || after.DeregisteringSince != nil {
		t.Errorf("kuma-cp's stream of the node changed: before %+v, after %+v", before, after)
	}
	if gaps := controlplane.DataplaneGaps(zone.CP.DataplaneTimeline(dp.Mesh, dp.Name), from, time.Now()); len(gaps) > 0 {
		t.Errorf("kuma-cp had no Dataplane during %v", gaps)
	}
	if m := agentMetrics(t, p.Readiness); !strings.Contains(m, `zoneproxy_envoy_handovers_total{result="success"} 1`) {
		t.Errorf("metrics do not count the handover:\n%s", m)
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("stop after a handover: exit %d\n%s", code, agent.Output())
	}
	assertNothingLeft(t, agent, newPID, p.WorkDir)
}

// A new Envoy that cannot start: the old one keeps serving, a log line and
// the metric say so.
func TestFailedEnvoyHandoverKeepsTheOldEnvoy(t *testing.T) {
	t.Parallel()
	wrapper, write := replaceableEnvoy(t)
	zone, p, agent := readyEgress(t, nil, "--envoy-binary", wrapper)
	_ = zone
	oldPID, _ := envoyOf(t, p)
	// The new build answers --version but fails to start.
	write("case \"$1\" in --version) exec " + bins.Envoy + " \"$@\";; esac\necho 'critical: cannot start' >&2\nexit 1\n")

	w := watch(5*time.Millisecond, handoverProbe(p))
	code, body := handOver(t, p)
	if code != http.StatusConflict || !strings.Contains(body, "keeps serving") {
		t.Fatalf("POST /envoy/handover: %d %q, want 409 saying the old Envoy keeps serving", code, body)
	}
	agent.AwaitLog("Envoy handover failed; the old Envoy keeps serving", promptly)
	if pid, gen := envoyOf(t, p); pid != oldPID || gen != 1 || harness.ProcessGone(oldPID) {
		t.Fatalf("/status names Envoy %d generation %d, want the old %d", pid, gen, oldPID)
	}
	if _, failures := w.finish(); len(failures) > 0 {
		t.Errorf("the failed handover disturbed the old Envoy:\n%s", strings.Join(failures, "\n"))
	}
	if m := agentMetrics(t, p.Readiness); !strings.Contains(m, `zoneproxy_envoy_handovers_total{result="failed"} 1`) {
		t.Errorf("metrics do not count the failure:\n%s", m)
	}
	agent.Signal(syscall.SIGKILL)
	agent.Wait(promptly)
}

// replaceableEnvoy is an --envoy-binary that runs the stand-in, and a way to
// replace it at once, as a package upgrade replaces Envoy's binary.
func replaceableEnvoy(t *testing.T) (string, func(script string)) {
	wrapper := filepath.Join(t.TempDir(), "envoy")
	write := func(script string) {
		t.Helper()
		tmp := wrapper + ".tmp"
		if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, wrapper); err != nil {
			t.Fatal(err)
		}
	}
	write("exec " + bins.Envoy + " \"$@\"\n")
	return wrapper, write
}

// A package upgrade that brings another Envoy build: the reload replaces
// the agent in place, and once kuma-cp's stream is back a new Envoy of the
// new build takes over beside the adopted one, dropping nothing.
func TestReloadWithAnotherEnvoyBuildHandsOver(t *testing.T) {
	t.Parallel()
	wrapper, write := replaceableEnvoy(t)
	zone, p, agent := readyEgress(t, nil, "--envoy-binary", wrapper, "--drain-time", "2s", "--drain-min", "1s")
	oldPID, _ := envoyOf(t, p)
	const newBuild = "0123456789abcdef0123456789abcdef01234567/1.39.1/Clean/RELEASE/BoringSSL"
	write("ENVOY_STANDIN_VERSION_OUTPUT='envoy  version: " + newBuild + "\n' exec " + bins.Envoy + " \"$@\"\n")

	w := watch(5*time.Millisecond, handoverProbe(p))
	if code, out := reloadCommand(t, zone, p); code != 0 {
		t.Fatalf("zoneproxy reload: exit %d\n%s", code, out)
	}
	agent.AwaitLog("after the reload, a new Envoy took over: another Envoy build", 30*time.Second)
	pid, gen := envoyOf(t, p)
	if pid == oldPID || gen != 2 {
		t.Errorf("/status names Envoy %d generation %d after the upgrade, want a new one of generation 2 (old %d)", pid, gen, oldPID)
	}
	harness.Eventually(t, promptly, "the old Envoy to exit after its drain", func() bool { return harness.ProcessGone(oldPID) })
	if _, failures := w.finish(); len(withoutKernelResets(t, failures, agent.Output())) > 0 {
		t.Errorf("the upgrade disturbed traffic or /ready:\n%s", strings.Join(failures, "\n"))
	}
	if _, body := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/status"); !strings.Contains(body, newBuild) {
		t.Errorf("/status does not name the new build:\n%s", body)
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// A reload that finds Envoy would start otherwise now, from the
// configuration's launch settings or from kuma-cp's bootstrap, hands over
// to a new Envoy started so, dropping nothing; one that finds nothing
// changed keeps Envoy (TestReloadKeepsEnvoyAndEveryConnection).
func TestReloadThatChangesEnvoysStartHandsOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(zone *harness.Zone, config string)
		reason string
		// started checks the new Envoy's command line and bootstrap.
		started func(cmdline, bootstrap string) bool
	}{
		{"concurrency in the configuration file", func(_ *harness.Zone, config string) {
			writeFile(t, config, "drain-min: 1s\nconcurrency: 3\n", 0o600)
		}, "the configuration changes Envoy's launch (--concurrency)", func(cmdline, _ string) bool {
			return strings.Contains(cmdline, "--concurrency\x003\x00")
		}},
		{"kuma-cp's bootstrap template", func(zone *harness.Zone, _ string) {
			zone.CP.SetBootstrapRuntime("re2.max_program_size.warn_level", 2000)
		}, "the control plane's bootstrap changed (layeredRuntime)", func(_, bootstrap string) bool {
			return strings.Contains(bootstrap, `"re2.max_program_size.warn_level":2000`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone, p, config, agent := readyWithConfigFile(t, "--drain-time", "1s")
			oldPID, _ := envoyOf(t, p)

			tc.change(zone, config)
			w := watch(5*time.Millisecond, handoverProbe(p))
			if code, out := reloadCommand(t, zone, p); code != 0 {
				t.Fatalf("zoneproxy reload: exit %d\n%s", code, out)
			}
			agent.AwaitLog("after the reload, a new Envoy took over: "+tc.reason, 30*time.Second)
			pid, gen := envoyOf(t, p)
			if pid == oldPID || gen != 2 {
				t.Fatalf("/status names Envoy %d generation %d, want a new one of generation 2 (old %d)", pid, gen, oldPID)
			}
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			bootstrap, _ := os.ReadFile(filepath.Join(p.WorkDir, "bootstrap-handover.yaml"))
			if !tc.started(string(cmdline), string(bootstrap)) {
				t.Errorf("the new Envoy was not started with the change: %q\n%s", cmdline, bootstrap)
			}
			harness.Eventually(t, promptly, "the old Envoy to exit after its drain", func() bool { return harness.ProcessGone(oldPID) })
			if _, failures := w.finish(); len(withoutKernelResets(t, failures, agent.Output())) > 0 {
				t.Errorf("the handover disturbed traffic or /ready:\n%s", strings.Join(failures, "\n"))
			}

			// The next reload finds the new Envoy as it would start it.
			if code, out := reloadCommand(t, zone, p); code != 0 {
				t.Fatalf("second zoneproxy reload: exit %d\n%s", code, out)
			}
			agent.AwaitLog("after the reload, the running Envoy is as this program would start it", 30*time.Second)
			if again, gen := envoyOf(t, p); again != pid || gen != 2 {
				t.Errorf("a reload with nothing changed replaced Envoy %d by %d (generation %d)", pid, again, gen)
			}
			agent.Signal(syscall.SIGTERM)
			if code := agent.Wait(promptly); code != 0 {
				t.Errorf("exit %d after SIGTERM", code)
			}
		})
	}
}
