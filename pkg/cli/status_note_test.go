package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// An ingress that cannot serve is reminded that a MeshZoneAddress
// pointing at it sends other zones there; `zoneproxy status` prints it.
func TestStatusRemindsAnIngressThatIsNotServingOfItsMeshZoneAddress(t *testing.T) {
	for _, tc := range []struct {
		role  config.Role
		phase state.Phase
		note  bool
	}{
		{config.RoleIngress, state.NoZoneListener, true},
		{config.RoleIngress, state.WaitingForControlPlane, true},
		{config.RoleCombined, state.Draining, true},
		{config.RoleIngress, state.Ready, false},
		{config.RoleEgress, state.NoZoneListener, false},
	} {
		note := statusNote(tc.role, tc.phase)
		if (note != "") != tc.note {
			t.Errorf("%s in %s: note %q", tc.role, tc.phase, note)
		}
		if !tc.note {
			continue
		}
		var out bytes.Buffer
		writeInstance(&out, instanceStatus{Instance: "payments-ingress", Running: true, Status: &agent.Status{Phase: string(tc.phase)}, Note: note})
		if !strings.Contains(out.String(), "note:") || !strings.Contains(out.String(), "MeshZoneAddress") {
			t.Errorf("status prints:\n%s", out.String())
		}
	}
}
