// Package errtext shapes error text for operators: messages name the path
// and field themselves, so Go's repetition of them is dropped, and text a
// peer sent is cut to a readable length.
package errtext

import (
	"errors"
	"os"
	"unicode/utf8"
)

// PathCause returns the cause inside an *os.PathError ("permission
// denied"), whose path the caller's message already names.
func PathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
