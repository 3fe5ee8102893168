package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// /status, which `zoneproxy status` prints on a terminal, never carries a
// control plane's line breaks or escape sequences raw.
func TestStatusEscapesTextFromElsewhere(t *testing.T) {
	const cp = "refused\nWATCHDOG=trigger\r\x1b[2J\u202e"
	in := Status{
		Phase:        "WAITING_FOR_CONTROL_PLANE",
		Detail:       cp,
		ControlPlane: ControlPlaneStatus{State: xds.Refused, Says: xds.ControlPlaneWords(xds.Refused, true, cp)},
		Envoy:        &EnvoyStatus{PID: 7, Build: "1.34\x1b]0;title\x07"},
		Reload:       &upgrade.ReloadStatus{Result: upgrade.ResultFailed, Error: cp},
	}
	out := in.outbound()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"detail": back.Detail, "says": back.ControlPlane.Says, "build": back.Envoy.Build, "reload error": back.Reload.Error} {
		if strings.ContainsAny(v, "\n\r\x1b\x07\u202e") {
			t.Errorf("%s carries control characters raw: %q", name, v)
		}
	}
	if !strings.Contains(back.Detail, `refused\nWATCHDOG=trigger`) {
		t.Errorf("detail not shown escaped: %q", back.Detail)
	}
	if in.Envoy.Build != "1.34\x1b]0;title\x07" {
		t.Error("outbound changed the status it was given")
	}
}
