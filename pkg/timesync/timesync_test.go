package timesync

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFromAdjtimex(t *testing.T) {
	cases := []struct {
		name        string
		state       int
		status      int32
		err         error
		wantSynced  bool
		wantProblem string
	}{
		{"synchronised", unix.TIME_OK, 0, nil, true, ""},
		{"leap second pending is still synchronised", unix.TIME_INS, 0, nil, true, ""},
		{"STA_UNSYNC set", unix.TIME_OK, unix.STA_UNSYNC, nil, false, "the system clock is not synchronised (NTP)"},
		{"TIME_ERROR returned", unix.TIME_ERROR, 0, nil, false, "the system clock is not synchronised (NTP)"},
		{"kernel refuses to answer", 0, 0, unix.EPERM, false, "cannot tell (adjtimex: operation not permitted)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fromAdjtimex(func(tx *unix.Timex) (int, error) {
				if tx.Modes != 0 {
					t.Fatalf("modes %#x: the clock must only be read", tx.Modes)
				}
				tx.Status = tc.status
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
	t.Logf("this host's clock synchronised: %t", s.Synced)
}
