package exitcode

import "errors"

// The codes of `zoneproxy reload` beside OK, 64 and Config: a package
// upgrade restarts an instance on CannotReload only.
const (
	// CannotReload (EX_UNAVAILABLE): the running agent cannot reload at
	// all (too old, not answering, another handover version, the exec
	// failed); only a restart brings in the new binary.
	CannotReload = 69
	// ReloadRefused (EX_TEMPFAIL): refused on purpose (drained, starting,
	// an identity change, a new program or configuration that cannot take
	// over); the agent serves on unchanged, and a restart would undo what
	// the refusal keeps.
	ReloadRefused = 75
)

type codedError struct {
	err  error
	code int
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// WithCode makes err exit with code.
func WithCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return codedError{err, code}
}

func codeOf(err error) (int, bool) {
	var ce codedError
	if errors.As(err, &ce) {
		return ce.code, true
	}
	return 0, false
}
