package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
)

// `zoneproxy status` says, in its plain form too, whether a stop under way
// is a restart, and the last change of ADS protocol after a kuma-cp
// upgrade.
func TestStatusSaysWhatAStopIsForAndTheProtocolChange(t *testing.T) {
	since := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   agent.Status
		want []string
		not  []string
	}{
		{"a restart", agent.Status{Phase: "TERMINATING", Stop: "restart"}, []string{"stopping:", "for a restart", "egress stays in kuma-cp's egress set"}, []string{"for a stop"}},
		{"a stop", agent.Status{Phase: "TERMINATING", Stop: "stop"}, []string{"stopping:", "for a stop"}, []string{"for a restart"}},
		{"serving", agent.Status{Phase: "READY"}, nil, []string{"stopping:", "ADS protocol:"}},
		{"after a kuma-cp upgrade", agent.Status{Phase: "READY", ProtocolChange: &inplace.ProtocolChangeStatus{State: "done", Says: "an Envoy started from kuma-cp's new bootstrap took over", Since: since}},
			[]string{"ADS protocol:", "done since 2026-11-29T12:00:00Z", "took over"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			st := tc.st
			writeInstance(&out, instanceStatus{Instance: "payments-egress", Running: true, Status: &st})
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("status lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("status says %q:\n%s", w, out.String())
				}
			}
		})
	}
}
