package exitcode

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestFromIOLeavesWhatARestartMayCureRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOSPC}, Runtime},
		{fmt.Errorf("write: %w", syscall.EROFS), Runtime},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, Config},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, Config},
	}
	for _, tt := range tests {
		if got := Of(FromIO(tt.err)); got != tt.want {
			t.Errorf("%v: exit %d, want %d", tt.err, got, tt.want)
		}
	}
}
