package sdnotify

import (
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// hostile is a control plane's error message that tries to speak for the
// unit and to drive the terminal of whoever reads `systemctl status`.
const hostile = "mesh refused\nWATCHDOG=trigger\rREADY=1\x1b[2J\u202eevil"

// assertOneStatus: msg is a READY and STATUS notification whose lines are
// only the assignments the agent meant, the STATUS= one escaped.
func assertOneStatus(t *testing.T, msg string) {
	t.Helper()
	for _, line := range strings.Split(msg, "\n") {
		name, _, _ := strings.Cut(line, "=")
		if name != "READY" && name != "STATUS" {
			t.Errorf("a line of its own: %q in %q", line, msg)
		}
		if strings.ContainsAny(line, "\r\x1b\u202e") {
			t.Errorf("raw control character in %q", line)
		}
	}
	if !strings.Contains(msg, `WATCHDOG=trigger\rREADY=1\x1b[2J\u202eevil`) {
		t.Errorf("the text is not shown escaped: %q", msg)
	}
}

func TestNotifyCannotBeInjected(t *testing.T) {
	s := listen(t)
	if ok, err := Notify(Ready, Status(hostile)); !ok || err != nil {
		t.Fatalf("Notify = %v, %v", ok, err)
	}
	assertOneStatus(t, s.next())
}

func TestRunCannotBeInjectedByADetail(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	start(t, tr, Options{})
	s.next()
	tr.Set(state.WaitingForControlPlane, hostile)
	assertOneStatus(t, s.next())
}
