package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// specEnvoy is the fake Envoy, passing on how the agent launched it.
type specEnvoy struct {
	*fakeEnvoy
	specs chan envoy.Spec
}

func (s specEnvoy) Start(spec envoy.Spec) (EnvoyProcess, error) {
	s.specs <- spec
	return s.fakeEnvoy.Start(spec)
}

// A token given inline is written trimmed, for the agent's user alone,
// into the work dir, never shown in Envoy's log lines, and gone with the
// work dir once the agent stops; a work dir the agent made itself (no
// --work-dir) goes whole.
func TestInlineTokenLivesInTheWorkDirOnly(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.secret-dataplane-token"
	for _, ownDir := range []bool{true, false} {
		name := "--work-dir"
		if !ownDir {
			name = "a temporary work dir"
		}
		t.Run(name, func(t *testing.T) {
			cp := testControlPlane(t)
			cfg := runConfig(t, cp.URL(), cp.CACertFile())
			cfg.DataplaneToken = "  " + token + "\n"
			if !ownDir {
				cfg.WorkDir = ""
			}
			fake := newFakeEnvoy(cfg)
			fake.admin.setLive(true)
			e := specEnvoy{fakeEnvoy: fake, specs: make(chan envoy.Spec, 4)}
			r := startRunWith(t, cfg, fake, e)
			var spec envoy.Spec
			select {
			case spec = <-e.specs:
			case <-time.After(30 * time.Second):
				t.Fatal("Envoy was not started")
			}
			awaitPhase(t, r.a.tracker, state.Ready)

			file := filepath.Join(spec.Dir, tokenFile)
			got, err := os.ReadFile(file)
			if err != nil || string(got) != token {
				t.Fatalf("token file %q (%v), want the token trimmed", got, err)
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("token file mode %v (%v), want 0600", fi.Mode(), err)
			}
			spec.Output("[2026-01-01 00:00:00.000][1][warning][config] sent token " + token + " to the control plane")
			if n := r.logs.FilterMessageSnippet(token).Len(); n != 0 {
				t.Fatalf("the token is in %d log lines", n)
			}
			if r.logs.FilterMessageSnippet("sent token [redacted] to the control plane").Len() != 1 {
				t.Error("Envoy's line is not logged with the token redacted")
			}

			r.stopNow(t)
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("the token file outlived the agent: %v", err)
			}
			if _, err := os.Stat(spec.Dir); os.IsNotExist(err) == ownDir {
				t.Errorf("work dir %s still there: %v, want %v", spec.Dir, err == nil, ownDir)
			}
		})
	}
}
