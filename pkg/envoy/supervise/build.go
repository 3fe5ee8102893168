package supervise

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// CheckBuild compares the build the running Envoy reports with the one
// the control plane was told. They differ when the binary at path is a
// wrapper whose Envoy was upgraded: the version cache in stateDir is
// keyed on the wrapper's file and kept the old answer. It takes the new
// one, for /status now and for the next start.
func (s *Supervisor) CheckBuild(ctx context.Context, admin Admin, path, stateDir string, told envoy.Version) {
	build, err := admin.Build(ctx)
	if err != nil || build == told.Build {
		return // nothing learnt: a busy admin
	}
	if e := s.Now(); e != nil {
		s.Rebuilt(e, build)
	}
	err = envoy.VersionCache{Dir: stateDir}.Correct(path, build)
	if errors.Is(err, envoy.ErrNotABuild) {
		return // a build the agent could not report either
	}
	s.Log.Warn("the running Envoy reports another build than the control plane was told at start-up (is "+config.KeyEnvoyBinary.Flag()+" a wrapper whose Envoy was upgraded?); the next start reports the running one",
		zap.String("told", told.Build), zap.String("running", build), zap.String("path", path))
	if err != nil {
		s.Log.Warn("cannot correct Envoy's version in the state dir", zap.Error(err))
	}
}
