package errtext

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestPathCause(t *testing.T) {
	pe := &os.PathError{Op: "open", Path: "/etc/zoneproxy/tokens/secret-name", Err: syscall.EACCES}
	cases := []struct {
		name string
		in   error
		want string
	}{
		{"path error", pe, "permission denied"},
		{"wrapped path error", fmt.Errorf("reading: %w", pe), "permission denied"},
		{"other error", errors.New("boom"), "boom"},
		{"not exist", &fs.PathError{Op: "stat", Path: "/x", Err: fs.ErrNotExist}, "file does not exist"},
	}
	for _, tc := range cases {
		if got := PathCause(tc.in).Error(); got != tc.want {
			t.Errorf("%s: PathCause = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"ééé", 3, "é…"}, // never cuts inside a rune
		{"", 0, ""},
	}
	for _, tc := range cases {
		if got := Truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
