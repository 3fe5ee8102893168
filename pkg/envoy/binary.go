// Package envoy runs and talks to an Envoy process: finding the binary and
// its version, the command line, the process itself, and the admin API.
// It knows nothing about Kuma.
package envoy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config/key"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// Version is what `envoy --version` reports.
type Version struct {
	Version string // e.g. 1.39.0
	Build   string // revision/version/status/build_type/ssl
}

// Locate resolves name (a path, or a name looked up on PATH) to an
// executable file.
func Locate(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			if strings.Contains(name, "/") {
				return "", fmt.Errorf("Envoy binary %s does not exist: install Envoy or fix %s", name, key.EnvoyBinary.Flag())
			}
			return "", fmt.Errorf("Envoy binary %q not found on PATH: install Envoy or set %s to its path", name, key.EnvoyBinary.Flag())
		}
		if errors.Is(err, os.ErrPermission) {
			return "", fmt.Errorf("Envoy binary %s is not executable: chmod +x it or fix %s", name, key.EnvoyBinary.Flag())
		}
		return "", fmt.Errorf("Envoy binary %s cannot be used: %v", name, err)
	}
	return path, nil
}

type credentialKey struct{}

// AsUser makes ReadVersion under ctx run the binary as cred's user: a
// check run by root must not run, as root, a binary the unit's user can
// replace.
func AsUser(ctx context.Context, cred *syscall.Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, cred)
}

// ReadVersion runs `<path> --version` once.
func ReadVersion(ctx context.Context, path string) (Version, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = ChildEnv() // a wrapper script sees no more than Envoy does
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second // a wrapper's child may hold the pipes open
	if cred, ok := ctx.Value(credentialKey{}).(*syscall.Credential); ok && cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			msg = ": " + errtext.Truncate(msg, 300)
		}
		err = fmt.Errorf("`%s --version` failed (%v)%s: check %s points at Envoy", path, err, msg, key.EnvoyBinary.Flag())
		if transient(ctx, cmd, err) {
			return Version{}, &TransientError{err}
		}
		return Version{}, err
	}
	v, err := ParseVersion(stdout.String())
	if err != nil {
		return Version{Version: "unknown", Build: "unknown"}, &UnparsedVersionError{err}
	}
	return v, nil
}

// TransientError is a failure of `--version` that says nothing about the
// binary (it timed out, was killed, or could not be forked): a restart
// may well get past it.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// IsTransient reports whether err is a TransientError.
func IsTransient(err error) bool {
	var te *TransientError
	return errors.As(err, &te)
}

// transient: the run timed out, a signal ended it (the OOM killer, the
// timeout's kill), or the fork or exec failed for want of resources or
// while the binary was being replaced.
func transient(ctx context.Context, cmd *exec.Cmd, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	if ps := cmd.ProcessState; ps != nil {
		ws, ok := ps.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled()
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ETXTBSY)
}

// UnparsedVersionError means Envoy ran but its version could not be read;
// the agent can carry on without it.
type UnparsedVersionError struct{ Err error }

func (e *UnparsedVersionError) Error() string { return e.Err.Error() }
func (e *UnparsedVersionError) Unwrap() error { return e.Err }

// The shapes of `envoy --version` output, e.g.
// "envoy  version: 50ef09…/1.39.0/Clean/RELEASE/BoringSSL".
var (
	versionFieldRe = regexp.MustCompile(`version:\s*(\S+)`)
	semverish      = regexp.MustCompile(`^\d+\.\d+\.\d+([-+.][0-9A-Za-z.-]+)?$`).MatchString
)

// ParseVersion reads Envoy's `--version` output: the build after the first
// "version:", whose second field is the x.y.z version.
func ParseVersion(out string) (Version, error) {
	m := versionFieldRe.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("unrecognised `envoy --version` output %q", errtext.Truncate(strings.TrimSpace(out), 200))
	}
	build := m[1]
	parts := strings.Split(build, "/")
	if len(parts) < 2 || !semverish(parts[1]) {
		return Version{}, fmt.Errorf("unrecognised Envoy build %q (want revision/x.y.z/status/type/ssl)", errtext.Truncate(build, 200))
	}
	return Version{Version: parts[1], Build: build}, nil
}
