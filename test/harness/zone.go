package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// Zone is a test control plane plus what agents need to reach it.
type Zone struct {
	t    testing.TB
	Bins Binaries
	CP   *controlplane.Server
	Dir  string
}

// FastLifecycle is kuma-cp's xDS stream lifecycle scaled down by 5, its
// ratios kept: deregistration delay 10 s -> 2 s, cache expiration
// 1 s -> 200 ms, propagation of a Dataplane change to the sidecars
// 3 s -> 600 ms (controlplane.Default*). NewZone and NewZoneWith use it
// for each of the three Options left zero; a test that wants kuma-cp's
// real timings sets them (controlplane.DefaultDeregistrationDelay, …).
var FastLifecycle = controlplane.Timings{
	DeregistrationDelay: controlplane.DefaultDeregistrationDelay / 5,
	CacheExpiration:     controlplane.DefaultCacheExpiration / 5,
	EgressPropagation:   controlplane.DefaultEgressPropagation / 5,
}

// WithFastLifecycle fills the lifecycle Options left zero from
// FastLifecycle.
func WithFastLifecycle(opts controlplane.Options) controlplane.Options {
	if opts.DeregistrationDelay == 0 {
		opts.DeregistrationDelay = FastLifecycle.DeregistrationDelay
	}
	if opts.CacheExpiration == 0 {
		opts.CacheExpiration = FastLifecycle.CacheExpiration
	}
	if opts.EgressPropagation == 0 {
		opts.EgressPropagation = FastLifecycle.EgressPropagation
	}
	return opts
}

// NewZone starts a test control plane with the given meshes and the
// FastLifecycle timings.
func NewZone(t testing.TB, bins Binaries, meshes ...string) *Zone {
	t.Helper()
	return NewZoneWith(t, bins, controlplane.Options{Meshes: meshes})
}

// NewZoneWith starts a test control plane with opts; Dir is set here,
// lifecycle timings left zero are FastLifecycle's, and an empty Kuma is
// the run's (KumaEnv).
func NewZoneWith(t testing.TB, bins Binaries, opts controlplane.Options) *Zone {
	t.Helper()
	dir := ShortTempDir(t)
	opts = WithFastLifecycle(opts)
	if opts.Kuma == "" {
		opts.Kuma = KumaOfRun()
	}
	opts.Dir = filepath.Join(dir, "cp")
	cp, err := controlplane.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	return &Zone{t: t, Bins: bins, CP: cp, Dir: dir}
}

// ShortTempDir is a temp dir with a short path: Envoy's admin socket
// lives inside work dirs and socket paths are limited.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "zp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TokenFile issues a dataplane token for mesh/workload into a 0600 file.
func (z *Zone) TokenFile(mesh, workload string) string {
	z.t.Helper()
	tok, err := z.CP.IssueToken(controlplane.TokenRequest{Mesh: mesh, Workload: workload, ValidFor: time.Hour})
	if err != nil {
		z.t.Fatal(err)
	}
	f, err := os.CreateTemp(z.Dir, "token-")
	if err != nil {
		z.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(tok); err != nil {
		z.t.Fatal(err)
	}
	return f.Name()
}

// Proxy is one zone proxy's settings in a test.
type Proxy struct {
	Mesh, Role                 string
	Readiness, Ingress, Egress int
	WorkDir                    string
	StateDir                   string // the last-known-good cache
	TokenFile                  string
}

// NewProxy picks free ports and a work dir, and issues a token bound to
// the default workload.
func (z *Zone) NewProxy(mesh, role string) Proxy {
	z.t.Helper()
	n := strconv.Itoa(FreePort(z.t))
	wd := filepath.Join(z.Dir, "wd-"+role+"-"+n)
	return Proxy{
		Mesh: mesh, Role: role, WorkDir: wd, StateDir: filepath.Join(z.Dir, "state-"+role+"-"+n),
		Readiness: FreePort(z.t), Ingress: FreePort(z.t), Egress: FreePort(z.t),
		TokenFile: z.TokenFile(mesh, "zone-proxy-"+mesh+"-"+role),
	}
}

// Args is the `zoneproxy run` command line for p, plus extra flags.
func (z *Zone) Args(p Proxy, extra ...string) []string {
	args := []string{"run",
		"--mesh", p.Mesh, "--role", p.Role, "--address", "127.0.0.1",
		"--cp-address", z.CP.URL(), "--ca-cert-file", z.CP.CACertFile(),
		"--dataplane-token-file", p.TokenFile, "--envoy-binary", z.Bins.Envoy,
		"--work-dir", p.WorkDir, "--state-dir", p.StateDir, "--readiness-port", strconv.Itoa(p.Readiness),
		"--ingress-port", strconv.Itoa(p.Ingress), "--egress-port", strconv.Itoa(p.Egress),
		"--retry-initial", "50ms", "--retry-max", "200ms", "--drain-time", "2s",
	}
	return append(args, extra...)
}

// Start runs zoneproxy for p.
func (z *Zone) Start(p Proxy, env []string, extra ...string) *Agent {
	z.t.Helper()
	return StartAgent(z.t, z.Bins.Zoneproxy, env, z.Args(p, extra...)...)
}
