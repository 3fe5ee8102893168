package upgrade

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// The serving and the next Envoy never share a bootstrap file or an admin
// socket: each handover moves to the other slot, and slot B's files lie
// beside slot A's.
func TestEachHandoverMovesToTheOtherSlot(t *testing.T) {
	a := Files{Bootstrap: "bootstrap.yaml", Admin: envoy.AdminAddress{Socket: "/run/zp/kuma-envoy-admin.sock"}}
	b := Files{Bootstrap: "bootstrap-handover.yaml", Admin: envoy.AdminAddress{Socket: "/run/zp/zoneproxy-envoy-admin-handover.sock"}}
	p := Place{Generation: 1, Slot: SlotA}
	for _, want := range []struct {
		generation int64
		files      Files
	}{{2, b}, {3, a}, {4, b}} {
		p = p.Next()
		got, err := p.Slot.FilesOf(a)
		if err != nil || p.Generation != want.generation || got != want.files {
			t.Fatalf("generation %d in slot %s runs on %+v (%v), want generation %d on %+v", p.Generation, p.Slot, got, err, want.generation, want.files)
		}
	}
}

// Slot B needs an admin socket of its own, which an admin API on TCP
// cannot give.
func TestSlotBRefusesAnAdminAPIOnTCP(t *testing.T) {
	a := Files{Bootstrap: "bootstrap.yaml", Admin: envoy.AdminAddress{TCP: "127.0.0.1:9901"}}
	if got, err := SlotA.FilesOf(a); err != nil || got != a {
		t.Fatalf("slot A: %+v, %v", got, err)
	}
	if _, err := SlotB.FilesOf(a); err == nil || !strings.Contains(err.Error(), "on TCP 127.0.0.1:9901, which a second Envoy cannot share") {
		t.Fatalf("slot B: %v", err)
	}
}

// The slot an adopted Envoy runs in, from what the previous program wrote:
// a program before slots wrote only the generation (slot B for the even
// ones), later ones the slot too; both are written, so that a program
// before slots reads the same slot back.
func TestTheHandedOverSlotIsReadFromOldAndNewStates(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		want        Place
	}{
		{"a build that kept no generation", `{"pid":7}`, Place{1, SlotA}},
		{"before slots, first Envoy", `{"pid":7,"handoverGeneration":1}`, Place{1, SlotA}},
		{"before slots, after one handover", `{"pid":7,"handoverGeneration":2}`, Place{2, SlotB}},
		{"before slots, after two handovers", `{"pid":7,"handoverGeneration":3}`, Place{3, SlotA}},
		{"with slots", `{"pid":7,"handoverGeneration":2,"slot":"b"}`, Place{2, SlotB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e EnvoyState
			if err := json.Unmarshal([]byte(tc.state), &e); err != nil {
				t.Fatal(err)
			}
			if got := e.Place(); got != tc.want {
				t.Fatalf("place %+v, want %+v", got, tc.want)
			}
		})
	}
	b, _ := json.Marshal(EnvoyState{PID: 7, HandoverGeneration: 2, Slot: SlotB})
	if s := string(b); !strings.Contains(s, `"handoverGeneration":2`) || !strings.Contains(s, `"slot":"b"`) {
		t.Fatalf("written %s, want the generation beside the slot", s)
	}
}
