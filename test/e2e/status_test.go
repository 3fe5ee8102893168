package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// An instance laid out as the unit zoneproxy@NAME reads it: NAME.yaml and
// NAME.env in the instance dir. What status and drain need to find it
// (work dir, readiness port) is only there, not on their command line.
func writeInstance(t *testing.T, dir, name string, p harness.Proxy) {
	t.Helper()
	yaml := fmt.Sprintf("mesh: %s\nrole: %s\nwork-dir: %s\n", p.Mesh, p.Role, p.WorkDir)
	env := fmt.Sprintf("# the unit's variables\nZONEPROXY_READINESS_PORT=%d\nZONEPROXY_DRAIN_TIME=%s\n", p.Readiness, maintenanceDrainTime)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
}

type statusJSON struct {
	Schema    int `json:"schemaVersion"`
	Instances []struct {
		Instance string `json:"instance"`
		Running  bool   `json:"running"`
		PID      int    `json:"pid"`
		Error    string `json:"error"`
		Status   *struct {
			Phase string `json:"phase"`
			Envoy *struct {
				PID   int    `json:"pid"`
				Build string `json:"build"`
			} `json:"envoy"`
			Drain        string `json:"drain"`
			ControlPlane struct {
				State string `json:"state"`
			} `json:"controlPlane"`
		} `json:"status"`
	} `json:"instances"`
}

// `status` lists every instance of the instance dir, running or not, and
// `drain`/`undrain --instance` act on the unit's instance; the caller's own
// ZONEPROXY_* variables are not the unit's.
func TestStatusAndMaintenanceByInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zone, p, agent := readyEgress(t, nil, "--drain-time", maintenanceDrainTime.String(), "--drain-min", "1s")
	writeInstance(t, dir, "payments-egress", p)
	idle := p
	idle.Readiness, idle.WorkDir = harness.FreePort(t), filepath.Join(zone.Dir, "wd-idle")
	writeInstance(t, dir, "payments-idle", idle)
	callerEnv := []string{"ZONEPROXY_READINESS_PORT=1"} // must not win over the unit's

	code, out := harness.Run(t, bins.Zoneproxy, callerEnv, "status", "--instance-dir", dir)
	if code != 1 {
		t.Errorf("status with one instance down: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"payments-egress: READY since ",
		"envoy:         pid ",
		"control plane: connected: kuma-cp has this proxy's stream",
		"cache:         not in use",
		"payments-idle: not running: nothing answers on 127.0.0.1:" + strconv.Itoa(idle.Readiness),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	code, out = harness.Run(t, bins.Zoneproxy, callerEnv, "status", "--instance-dir", dir, "--instance", "payments-egress", "-o", "json")
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status -o json: exit %d, %v\n%s", code, err, out)
	}
	in := st.Instances[0]
	if st.Schema != 1 || len(st.Instances) != 1 || !in.Running || in.PID != agent.PID() || in.Status == nil ||
		in.Status.Phase != "READY" || in.Status.Envoy == nil || in.Status.Envoy.PID == 0 || in.Status.ControlPlane.State != "connected" {
		t.Errorf("status -o json says:\n%s", out)
	}

	if code, out := harness.Run(t, bins.Zoneproxy, callerEnv, "drain", "--instance-dir", dir, "--instance", "payments-egress"); code != 0 || !strings.Contains(out, "DRAINED") {
		t.Fatalf("drain --instance: exit %d\n%s", code, out)
	}
	_, out = harness.Run(t, bins.Zoneproxy, nil, "status", "--instance-dir", dir, "--instance", "payments-egress")
	if !strings.Contains(out, "payments-egress: DRAINED since ") || !strings.Contains(out, "drain:         maintenance") {
		t.Errorf("status while drained:\n%s", out)
	}
	if code, out := harness.Run(t, bins.Zoneproxy, callerEnv, "undrain", "--instance-dir", dir, "--instance", "payments-egress"); code != 0 || !strings.Contains(out, "READY") {
		t.Fatalf("undrain --instance: exit %d\n%s", code, out)
	}

	code, out = harness.Run(t, bins.Zoneproxy, nil, "status", "--instance-dir", dir, "--instance", "payments-egres")
	if code != 1 || !strings.Contains(out, "--instance payments-egres: no "+filepath.Join(dir, "payments-egres.yaml")+" (instances here: payments-egress, payments-idle)") {
		t.Errorf("a misspelt instance: exit %d\n%s", code, out)
	}
}
