package supervise

import (
	"context"
	"errors"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
)

// buildAdmin reports build, or fails to.
type buildAdmin struct {
	Admin
	build string
	err   error
}

func (b buildAdmin) Build(context.Context) (string, error) { return b.build, b.err }

// The build the running Envoy reports replaces the one the control plane
// was told in /status, with a warning; what it cannot learn changes nothing.
func TestCheckBuild(t *testing.T) {
	const told, upgraded = "abc/1.39.0/Clean/RELEASE/BoringSSL", "def/1.39.1/Clean/RELEASE/BoringSSL"
	tests := []struct {
		name      string
		build     string
		err       error
		wantBuild string
		wantWarn  bool
	}{
		{name: "the build told", build: told, wantBuild: told},
		{name: "a busy admin", err: errors.New("timeout"), wantBuild: told},
		{name: "an upgraded Envoy behind a wrapper", build: upgraded, wantBuild: upgraded, wantWarn: true},
		{name: "a build no one could report", build: "garbage", wantBuild: "garbage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := testSupervisor(t)
			s.Started(Current{Proc: supervisetest.NewProc(), Build: told, Generation: 1})
			s.CheckBuild(context.Background(), buildAdmin{build: tt.build, err: tt.err}, "/fake/envoy", "", envoy.Version{Build: told})
			if got := s.Now().Build; got != tt.wantBuild {
				t.Fatalf("/status build %q, want %q", got, tt.wantBuild)
			}
			if warned := logs.FilterMessageSnippet("the running Envoy reports another build").Len() == 1; warned != tt.wantWarn {
				t.Fatalf("warned %v, want %v: %v", warned, tt.wantWarn, logs.All())
			}
		})
	}
	t.Run("an Envoy started meanwhile keeps its own build", func(t *testing.T) {
		s, _ := testSupervisor(t)
		s.Started(Current{Proc: supervisetest.NewProc(), Build: told})
		old := s.Now()
		s.Started(Current{Proc: supervisetest.NewProc(), Build: "next"})
		s.Rebuilt(old, upgraded)
		if got := s.Now().Build; got != "next" {
			t.Fatalf("build %q, want the newer Envoy's", got)
		}
	})
}
