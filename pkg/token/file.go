package token

import (
	"errors"
	"os"
	"strings"
)

// ErrEmpty is a token file that holds nothing, e.g. one being rewritten
// in place during a rotation.
var ErrEmpty = errors.New("the token file is empty")

// ReadFile reads a token file as the control plane would use it: trimmed,
// and an error when there is no token in it.
func ReadFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", ErrEmpty
	}
	return tok, nil
}
