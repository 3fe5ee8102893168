package dataplane

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWithEgressNotReadyMarksOnlyEgressListeners(t *testing.T) {
	tests := []struct {
		name, in   string
		wantStates []string // per listener, in order
		wantErr    string
	}{
		{"egress, JSON", `{"type":"Dataplane","mesh":"payments","name":"zp","labels":{"kuma.io/workload":"w"},"networking":{"address":"10.0.0.1","listeners":[{"type":"ZoneEgress","address":"10.0.0.1","port":10002,"name":"ze-port"}]}}`,
			[]string{"NotReady"}, ""},
		{"combined, YAML", "type: Dataplane\nmesh: payments\nname: zp\nnetworking:\n  address: 10.0.0.1\n  listeners:\n  - type: ZoneIngress\n    port: 10001\n  - type: ZoneEgress\n    port: 10002\n",
			[]string{"", "NotReady"}, ""},
		{"ingress only", `{"networking":{"listeners":[{"type":"ZoneIngress","port":10001}]}}`, nil, "no ZoneEgress listener"},
		{"not a Dataplane", `[1, 2`, nil, "cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := WithEgressNotReady(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var dp struct {
				Mesh       string
				Labels     map[string]string
				Networking struct {
					Address   string
					Listeners []struct {
						Type  string
						Port  uint32
						State string
					}
				}
			}
			if err := json.Unmarshal([]byte(out), &dp); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if dp.Mesh != "payments" || dp.Networking.Address != "10.0.0.1" {
				t.Fatalf("lost fields: %s", out)
			}
			if len(dp.Networking.Listeners) != len(tt.wantStates) {
				t.Fatalf("listeners: %s", out)
			}
			for i, l := range dp.Networking.Listeners {
				if l.State != tt.wantStates[i] || l.Port == 0 {
					t.Errorf("listener %d: %+v", i, l)
				}
			}
		})
	}
}
