package token

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// ErrEmpty is a token file that holds nothing, e.g. one being rewritten
// in place during a rotation.
var ErrEmpty = errors.New("the token file is empty")

// ErrNotRegular is a token file that is no regular file once its
// symbolic links are followed: a directory, a named pipe (a process
// substitution such as <(…) is one), a device such as /dev/zero, a socket.
// Reading one could block for ever, never end, or consume what the next
// read needs; it is refused without being read. Errors wrap it as a
// *NotRegularError.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is a token file larger than MaxFileSize. Errors wrap it as
// a *TooLargeError.
var ErrTooLarge = errors.New("too large for a token file")

// MaxFileSize bounds what is read of a token file: a Kuma dataplane token
// is about 1 KiB, a token with many tags a few.
const MaxFileSize = 64 << 10

// NotRegularError says what the file is instead of a regular file.
type NotRegularError struct {
	Mode fs.FileMode // the file type bits
}

func (e *NotRegularError) Error() string { return "it is " + Kind(e.Mode) + ", not a regular file" }
func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// TooLargeError says how large the file is (at least), and the limit.
type TooLargeError struct {
	Size, Max int64
}

func (e *TooLargeError) Error() string {
	if e.Max == MaxFileSize {
		return fmt.Sprintf("it holds %d bytes or more, more than the %d KiB a token file may hold (a dataplane token is about 1 KiB)", e.Size, e.Max>>10)
	}
	return fmt.Sprintf("it holds %d bytes or more, more than the %d KiB it may hold", e.Size, e.Max>>10)
}
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// Kind names a file type for a message: "a directory", "a named pipe
// (FIFO)"…
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ReadFile reads a token file as the control plane would use it: trimmed,
// and an error when there is no token in it.
func ReadFile(path string) (string, error) {
	tok, _, err := readFile(path)
	return tok, err
}

// ReadRaw reads a token file as it is, untrimmed, with ReadFile's bounds.
func ReadRaw(path string) ([]byte, error) {
	b, _, err := readBounded(path, MaxFileSize)
	return b, err
}

// ReadRegular reads another credential file (a CA certificate) with
// ReadFile's care: a regular file only, and at most max bytes, else an
// error wrapping ErrNotRegular or ErrTooLarge.
func ReadRegular(path string, max int64) ([]byte, FileInfo, error) {
	return readBounded(path, max)
}

// FileInfo is what the agent checks of a token file's ownership.
type FileInfo struct {
	Mode     fs.FileMode // permission bits
	UID, GID int         // -1 when unknown
}

// Configured is the dataplane token a configuration names, and its claims.
type Configured struct {
	Raw    string
	Claims Claims
	// Mode is the token file's permissions (0 for an inline token).
	Mode fs.FileMode
	// File is the token file's ownership and permissions (zero for an
	// inline token); set whenever the file was opened.
	File FileInfo
}

// Load reads the token in the file at path, or takes inline when path is
// "", and decodes its claims. The file's problems come back as from
// ReadFile (a directory, a pipe or a device as ErrNotRegular, an
// over-long file as ErrTooLarge), a token that is no JWT as ErrNotJWT;
// Mode and File are set whenever the file was opened.
func Load(inline, path string) (Configured, error) {
	c := Configured{Raw: inline}
	if path != "" {
		var err error
		if c.Raw, c.File, err = readFile(path); err != nil {
			c.Mode = c.File.Mode
			return c, err
		}
		c.Mode = c.File.Mode
	}
	var err error
	c.Claims, err = Parse(c.Raw)
	return c, err
}

func readFile(path string) (string, FileInfo, error) {
	b, info, err := readBounded(path, MaxFileSize)
	if err != nil {
		return "", info, err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", info, ErrEmpty
	}
	return tok, info, nil
}

// readBounded reads a regular file of at most max bytes. A file
// that is none is refused before it is opened, so that opening a device
// has no effect; the file is opened without blocking (a named pipe put
// there meanwhile cannot hold the open up) and checked again once open.
func readBounded(path string, max int64) ([]byte, FileInfo, error) {
	info := FileInfo{UID: -1, GID: -1}
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // what the caller asked for: "open <path>: no such file"
		}
		return nil, info, err
	}
	if !fi.Mode().IsRegular() {
		return nil, info, &fs.PathError{Op: "open", Path: path, Err: &NotRegularError{Mode: fi.Mode().Type()}}
	}
	raceHook("stat", path)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, info, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, info, err
	}
	info = fileInfo(fi)
	if !fi.Mode().IsRegular() {
		return nil, info, &fs.PathError{Op: "open", Path: path, Err: &NotRegularError{Mode: fi.Mode().Type()}}
	}
	raceHook("fstat", path)
	if fi.Size() > max {
		return nil, info, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: fi.Size(), Max: max}}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, info, err
	}
	if int64(len(b)) > max { // it grew since fstat
		return nil, info, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: int64(len(b)), Max: max}}
	}
	return b, info, nil
}

// raceHook lets tests change the file between readBounded's steps, as a
// rotation (or an attacker) could.
var raceHook = func(step, path string) {}

func fileInfo(fi fs.FileInfo) FileInfo {
	info := FileInfo{Mode: fi.Mode().Perm(), UID: -1, GID: -1}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID, info.GID = int(st.Uid), int(st.Gid)
	}
	return info
}
