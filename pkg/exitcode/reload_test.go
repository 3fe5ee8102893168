package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

// A reload's own codes survive wrapping, and win over the default 1: a
// package upgrade restarts an instance on CannotReload only.
func TestWithCodeGivesTheReloadItsOwnExitCode(t *testing.T) {
	refused := errors.New("reload refused: drained for maintenance")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"none", nil, OK},
		{"refused on purpose", WithCode(refused, ReloadRefused), ReloadRefused},
		{"cannot reload at all", WithCode(errors.New("did not answer"), CannotReload), CannotReload},
		{"wrapped", fmt.Errorf("reload: %w", WithCode(refused, ReloadRefused)), ReloadRefused},
		{"no code", refused, Runtime},
		{"a configuration error", AsConfig(refused), Config},
		{"a nil error stays nil", WithCode(nil, CannotReload), OK},
	}
	for _, tt := range tests {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
}
