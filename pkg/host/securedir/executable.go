package securedir

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CheckExecutable says whether f, opened from path, is a program the
// agent may run as itself: a regular file of root or this user that
// nobody else may write, in directories only root or this user may
// change (sticky ones excepted), as a trusted directory's parents.
func CheckExecutable(f *os.File, path string) error {
	euid := uint32(os.Geteuid())
	st, err := stat(f)
	if err != nil {
		return fmt.Errorf("program %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: program %s is not a regular file", ErrUntrusted, path)
	case st.Uid != 0 && st.Uid != euid:
		return fmt.Errorf("%w: program %s is owned by uid %d: that user could replace it; install it as root's", ErrUntrusted, path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: program %s is writable by other users (mode %04o): chmod go-w it", ErrUntrusted, path, st.Mode&0o777)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("program %s: %w", path, err)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		d, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("program %s: %w", path, err)
		}
		err = checkAncestor(d, dir, "program", path, euid)
		d.Close()
		if err != nil || dir == "/" {
			return err
		}
	}
}
