package accesslog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// fifoMode lets Envoy, which runs as the agent's user, write; no one else.
const fifoMode = 0o600

// makeFIFO replaces whatever is at path with a fresh FIFO and opens it
// O_RDWR: the open does not wait for a writer, and because this end also
// counts as a writer, reads never see EOF when Envoy closes its end.
func makeFIFO(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("access-log FIFO %s: a directory is in the way; remove it or choose another work dir", path)
	case err == nil:
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("access-log FIFO %s: cannot remove what is there: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("access-log FIFO %s: %w", path, err)
	}
	if err := syscall.Mkfifo(path, fifoMode); err != nil {
		return nil, fmt.Errorf("access-log FIFO %s: cannot create it: %w", path, err)
	}
	// The umask may have taken the owner's write bit.
	if err := os.Chmod(path, fifoMode); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("access-log FIFO %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("access-log FIFO %s: cannot open it: %w", path, err)
	}
	if st, err := f.Stat(); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		f.Close()
		return nil, fmt.Errorf("access-log FIFO %s: replaced by something else while opening it", path)
	}
	return f, nil
}

// readAvailable reads what is in the FIFO now; 0 or EAGAIN when it is empty.
func readAvailable(f *os.File, buf []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true // never wait for more
	}); err != nil {
		return 0, err
	}
	return n, rerr
}
