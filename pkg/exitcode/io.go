package exitcode

import (
	"errors"
	"syscall"
)

// transientIO are the I/O failures a restart (or an operator freeing disk
// space) can cure: systemd should keep trying.
var transientIO = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE}

// FromIO marks a file-system error as a configuration problem (exit 78),
// unless it is one a restart may cure (exit 1).
func FromIO(err error) error {
	for _, e := range transientIO {
		if errors.Is(err, e) {
			return err
		}
	}
	return AsConfig(err)
}
