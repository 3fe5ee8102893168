package token

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// ErrEmpty is a token file that holds nothing, e.g. one being rewritten
// in place during a rotation.
var ErrEmpty = errors.New("the token file is empty")

// ReadFile reads a token file as the control plane would use it: trimmed,
// and an error when there is no token in it.
func ReadFile(path string) (string, error) {
	tok, _, err := readFile(path)
	return tok, err
}

// Configured is the dataplane token a configuration names, and its claims.
type Configured struct {
	Raw    string
	Claims Claims
	// Mode is the token file's permissions (0 for an inline token).
	Mode fs.FileMode
}

// Load reads the token in the file at path, or takes inline when path is
// "", and decodes its claims. The file's problems come back as from
// ReadFile (a directory as syscall.EISDIR), a token that is no JWT as
// ErrNotJWT; Mode is set whenever the file was opened.
func Load(inline, path string) (Configured, error) {
	c := Configured{Raw: inline}
	if path != "" {
		var err error
		if c.Raw, c.Mode, err = readFile(path); err != nil {
			return c, err
		}
	}
	var err error
	c.Claims, err = Parse(c.Raw)
	return c, err
}

func readFile(path string) (string, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if fi.IsDir() { // as os.ReadFile says it
		return "", 0, &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	}
	mode := fi.Mode().Perm()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", mode, err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", mode, ErrEmpty
	}
	return tok, mode, nil
}
