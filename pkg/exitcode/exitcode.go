// Package exitcode maps errors to the agent's process exit codes.
package exitcode

import "errors"

const (
	// OK is a clean stop.
	OK = 0
	// Runtime is a failure systemd may retry: Envoy died, bootstrap timed out.
	Runtime = 1
	// Config (EX_CONFIG) is a configuration or permanent error; retrying
	// without a change cannot help, so units set RestartPreventExitStatus=78.
	Config = 78
)

type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// AsConfig marks err as a configuration error (exit 78).
func AsConfig(err error) error {
	if err == nil {
		return nil
	}
	return configError{err}
}

// IsConfig reports whether err is, or wraps, a configuration error.
func IsConfig(err error) bool {
	var ce configError
	return errors.As(err, &ce)
}

// Of returns the exit code for err.
func Of(err error) int {
	if err == nil {
		return OK
	}
	if code, ok := codeOf(err); ok {
		return code
	}
	if IsConfig(err) {
		return Config
	}
	return Runtime
}
