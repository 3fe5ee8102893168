// Package timesync tells whether the kernel considers the system clock
// synchronised (by NTP, chrony or timesyncd). A VM at boot can run on a
// wrong clock until then, which makes certificates and tokens look expired
// or not yet valid although they are fine.
package timesync

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Status is the kernel's answer.
type Status struct {
	Synced bool
	// Err is set when the kernel could not be asked (systemd's
	// ProtectClock= denies adjtimex); Synced is then false.
	Err error
}

// Check asks adjtimex(2) without changing anything.
func Check() Status { return fromAdjtimex(unix.Adjtimex) }

// unsyncedMaxError is the kernel's NTP_PHASE_LIMIT in microseconds: the
// maximum error it starts at and grows towards once nothing disciplines
// the clock.
const unsyncedMaxError = 16_000_000

// fromAdjtimex decides as systemd's timedatectl does ("System clock
// synchronized"): by the maximum error alone. STA_UNSYNC, and with it
// TIME_ERROR, can stay set on a synchronised clock: chronyd leaves it set
// unless rtcsync is on, so that the kernel does not write the RTC.
func fromAdjtimex(adjtimex func(*unix.Timex) (int, error)) Status {
	var tx unix.Timex // Modes 0: read only, needs no privilege
	if _, err := adjtimex(&tx); err != nil {
		return Status{Err: fmt.Errorf("adjtimex: %w", err)}
	}
	return Status{Synced: tx.Maxerror < unsyncedMaxError}
}

// Checker returns the clock's status; tests fake it.
type Checker func() Status

// Problem names the clock as the likely cause of a time check failing, for
// messages; it is "" when the clock is synchronised.
func (s Status) Problem() string {
	switch {
	case s.Synced:
		return ""
	case s.Err != nil:
		return fmt.Sprintf("the system clock may not be synchronised (NTP): zoneproxy cannot tell (%v)", s.Err)
	}
	return "the system clock is not synchronised (NTP)"
}
