package agent

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

// HandoverCheck is what `run --handover-check` prints: what the binary
// would read of a handover, and where the configuration puts the agent.
type HandoverCheck struct {
	Manifest int    `json:"manifest"`
	Handover int    `json:"handover"`
	Version  string `json:"version"`
	// Envoy is EnvoyFixed of the new configuration.
	Envoy map[string]string `json:"envoy"`
}

// HandoverCheckFlag is the hidden flag of `run` that checks instead of
// running.
const HandoverCheckFlag = "handover-check"

// checkNewProgram runs the new binary with this program's arguments and
// environment and --handover-check: it loads and validates the
// configuration and says what it would read of a handover.
func (a *Agent) checkNewProgram() error {
	r := &a.rl
	// The program is judged before it is run at all, even for the check:
	// one that another user could have replaced is never run.
	prog, err := reexec.OpenProgram(r.exe)
	if err != nil {
		return fmt.Errorf("%w: the new program cannot take over: %w", ErrReloadRefused, err)
	}
	defer prog.Close()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	// The child runs the file judged, handed to it as its descriptor 3
	// (open across the exec, so that a #! program's interpreter reads it).
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3", append(append([]string(nil), r.args[1:]...), "--"+HandoverCheckFlag)...)
	cmd.Args[0] = r.exe
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
		return fmt.Errorf("%w: the new program %s cannot take over: %s", ErrReloadRefused, r.exe, oneLine(why))
	}
	var c HandoverCheck
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		return cannotReload{fmt.Errorf("%w: the new program %s does not say what it can take over (is it an older zoneproxy?): %q; restart instead", ErrReloadRefused, r.exe, oneLine(out.String()))}
	}
	switch {
	case c.Manifest != reexec.ManifestVersion || c.Handover != HandoverVersion:
		return cannotReload{fmt.Errorf("%w: the new program (zoneproxy %s) reads handover version %d.%d, this one writes %d.%d; restart instead",
			ErrReloadRefused, c.Version, c.Manifest, c.Handover, reexec.ManifestVersion, HandoverVersion)}
	}
	if a.envoyNow.Load() == nil {
		return nil // no Envoy yet: the new program starts over on the new configuration
	}
	if changed := identityChanges(EnvoyFixed(a.cfg), c.Envoy); len(changed) > 0 {
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
