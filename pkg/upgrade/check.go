package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
)

// checkTimeout bounds the new binary's check of the configuration.
const checkTimeout = 30 * time.Second

// Check is what `run --handover-check` prints: what the binary would read
// of a handover, and where the configuration puts the agent.
type Check struct {
	Manifest int    `json:"manifest"`
	Handover int    `json:"handover"`
	Version  string `json:"version"`
	// Envoy is the agent's EnvoyFixed of the new configuration.
	Envoy map[string]string `json:"envoy"`
}

// CheckFlag is the hidden flag of `run` that checks instead of running.
const CheckFlag = "handover-check"

// CheckProgram runs the new binary exe with this program's arguments and
// environment and --handover-check: it loads and validates the
// configuration and says what it would read of a handover. Every error
// wraps ErrReloadRefused.
func CheckProgram(exe string, args []string) (Check, error) {
	// The program is judged before it is run at all, even for the check:
	// one that another user could have replaced is never run.
	prog, err := reexec.OpenProgram(exe)
	if err != nil {
		return Check{}, fmt.Errorf("%w: the new program cannot take over: %w", ErrReloadRefused, err)
	}
	defer prog.Close()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	// The child runs the file judged, handed to it as its descriptor 3
	// (open across the exec, so that a #! program's interpreter reads it).
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3", append(append([]string(nil), args[1:]...), "--"+CheckFlag)...)
	cmd.Args[0] = exe
	cmd.ExtraFiles = []*os.File{prog}
	// The same environment, but for systemd's variables: the check never
	// speaks for the unit.
	cmd.Env = sdnotify.ScrubEnv(os.Environ())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(errOut.String())
		if why == "" {
			why = err.Error()
		} else if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			why = fmt.Sprintf("%s (exit %d)", why, ee.ExitCode())
		}
		return Check{}, fmt.Errorf("%w: the new program %s cannot take over: %s", ErrReloadRefused, exe, oneLine(why))
	}
	var c Check
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		return Check{}, CannotReload{fmt.Errorf("%w: the new program %s does not say what it can take over (is it an older zoneproxy?): %q; restart instead", ErrReloadRefused, exe, oneLine(out.String()))}
	}
	return c, nil
}

// Verdict judges what the new program said. identityChanges names the
// settings the new configuration changes that only a restart applies;
// nil while no Envoy runs (the new program then starts over).
func (c Check) Verdict(identityChanges func(next map[string]string) []string) error {
	if c.Manifest != reexec.ManifestVersion || c.Handover != Version {
		return CannotReload{fmt.Errorf("%w: the new program (zoneproxy %s) reads handover version %d.%d, this one writes %d.%d; restart instead",
			ErrReloadRefused, c.Version, c.Manifest, c.Handover, reexec.ManifestVersion, Version)}
	}
	if identityChanges == nil {
		return nil
	}
	if changed := identityChanges(c.Envoy); len(changed) > 0 {
		return fmt.Errorf("%w: the new configuration changes the proxy's identity or where its xDS goes, which the running Envoy was started with (%s); restart to apply it",
			ErrReloadRefused, strings.Join(changed, ", "))
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
