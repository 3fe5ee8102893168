package timesync

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFromAdjtimex(t *testing.T) {
	const notSynced = "the system clock is not synchronised (NTP)"
	cases := []struct {
		name        string
		state       int
		status      int32
		maxError    int64 // µs
		err         error
		wantSynced  bool
		wantProblem string
	}{
		{"synchronised", unix.TIME_OK, 0, 20_000, nil, true, ""},
		{"leap second pending is still synchronised", unix.TIME_INS, 0, 20_000, nil, true, ""},
		// chronyd without rtcsync keeps STA_UNSYNC set, so the kernel says
		// TIME_ERROR, while the clock is synchronised; timedatectl says yes.
		{"chrony without rtcsync", unix.TIME_ERROR, unix.STA_UNSYNC, 17_288, nil, true, ""},
		{"maximum error just under the limit", unix.TIME_OK, 0, 15_999_999, nil, true, ""},
		{"never synchronised since boot", unix.TIME_ERROR, unix.STA_UNSYNC, 16_000_000, nil, false, notSynced},
		{"drifted to the limit without a daemon", unix.TIME_OK, 0, 16_000_000, nil, false, notSynced},
		{"kernel refuses to answer", 0, 0, 0, unix.EPERM, false, "cannot tell (adjtimex: operation not permitted)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fromAdjtimex(func(tx *unix.Timex) (int, error) {
				if tx.Modes != 0 {
					t.Fatalf("modes %#x: the clock must only be read", tx.Modes)
				}
				tx.Status, tx.Maxerror = tc.status, tc.maxError
				return tc.state, tc.err
			})
			if s.Synced != tc.wantSynced {
				t.Errorf("synced = %t, want %t", s.Synced, tc.wantSynced)
			}
			if p := s.Problem(); (tc.wantProblem == "") != (p == "") || !strings.Contains(p, tc.wantProblem) {
				t.Errorf("problem %q, want %q", p, tc.wantProblem)
			}
		})
	}
}

func TestCheckAsksTheKernel(t *testing.T) {
	s := Check()
	if errors.Is(s.Err, unix.EPERM) {
		t.Skip("a seccomp filter denies adjtimex here")
	}
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		t.Fatal(err)
	}
	// The error grows by 0.5 ms a second up to the limit and stays there:
	// only just under it could the two reads disagree.
	if tx.Maxerror > unsyncedMaxError-1_000_000 && tx.Maxerror < unsyncedMaxError {
		t.Skipf("maximum error %d µs is too close to the limit to compare", tx.Maxerror)
	}
	if want := tx.Maxerror < unsyncedMaxError; s.Synced != want {
		t.Errorf("synced = %t, but the kernel's maximum error is %d µs", s.Synced, tx.Maxerror)
	}
}
