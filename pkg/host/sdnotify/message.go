package sdnotify

import (
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// Field is one assignment of a notify message, e.g. STATUS=draining.
type Field struct{ Name, Value string }

// The assignments without a value of their own.
var (
	Ready     = Field{"READY", "1"}
	Stopping  = Field{"STOPPING", "1"}
	Reloading = Field{"RELOADING", "1"}
	Watchdog  = Field{"WATCHDOG", "1"}
)

// Status is STATUS=v.
func Status(v string) Field { return Field{"STATUS", v} }

// Message is fields as systemd reads them, one assignment a line. Each
// value is made one line (errtext.Outbound) first: whatever a control
// plane's message carries stays that field's value and can never add an
// assignment (WATCHDOG=trigger, READY=1) of its own.
func Message(fields ...Field) string {
	lines := make([]string, len(fields))
	for i, f := range fields {
		lines[i] = f.Name + "=" + errtext.Outbound(f.Value)
	}
	return strings.Join(lines, "\n")
}

// Notify sends fields to systemd: false and no error without NOTIFY_SOCKET.
func Notify(fields ...Field) (bool, error) { return daemon.SdNotify(false, Message(fields...)) }
