package agent

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// HandoverVersion changes when handoverState's meaning does. The check
// before a reload (`run --handover-check`) prints the version the new
// binary reads; a reload to a binary that reads another is refused.
const HandoverVersion = 1

// handoverState is what an agent hands its next program besides the open
// files (handoverFiles): nothing secret, since /proc shows it to the
// same user.
type handoverState struct {
	Version int `json:"version"`
	// Generation is the handing-over program's: the next one is one more.
	Generation      int `json:"generation"`
	EnvoyGeneration int `json:"envoyGeneration"`
	// WorkDir is the work dir's path; Temporary: the agent made it.
	WorkDir   string `json:"workDir"`
	Temporary bool   `json:"temporary,omitempty"`
	StateDir  string `json:"stateDir,omitempty"`
	// Envoy is the running Envoy, nil while waiting for the mesh or the
	// control plane: the next program then starts over.
	Envoy *envoyHandover `json:"envoy,omitempty"`
	// Reloads counts reloads by result, carried so that the counter of
	// reloads goes on across them.
	Reloads map[string]float64 `json:"reloads,omitempty"`
	// Handovers counts Envoy handovers by result, carried the same way.
	Handovers map[string]float64 `json:"handovers,omitempty"`
}

type envoyHandover struct {
	PID     int           `json:"pid"`
	Path    string        `json:"path"`
	Version envoy.Version `json:"version"`
	// Relayed: Envoy's xDS goes through the agent; Resume says how the
	// relay reached the control plane.
	Relayed bool            `json:"relayed"`
	Resume  *xds.Resumption `json:"resume,omitempty"`
	// HandoverGeneration is the running Envoy's in the Envoy handovers'
	// count (handover.go): an even one runs on the handover's bootstrap
	// copy and admin socket.
	HandoverGeneration int64 `json:"handoverGeneration,omitempty"`
	// Launch is envoyLaunch of the configuration the running Envoy was
	// launched with: the next program hands over to a new Envoy when its
	// own differs. Absent from programs that refused such reloads.
	Launch map[string]string `json:"launch,omitempty"`
}

// Names of the handed-over files.
const (
	fileWorkDir     = "work-dir"
	fileWorkLock    = "work-dir-lock"
	fileStateDir    = "state-dir"
	fileStateLock   = "state-dir-lock"
	fileRelay       = "relay-socket"
	fileAccessLog   = "access-log-fifo"
	fileMeshMetric  = "meshmetric-socket"
	fileEnvoyOutput = "envoy-output"
	// The loopback server's and the extra listeners' are named by their
	// flag, e.g. "--readiness-port".
)

// reloader is the agent's side of reloads: what it holds that must
// survive one, and what it was handed by the previous program.
type reloader struct {
	mu  sync.Mutex // held by a reload from its decision to the exec, and by Envoy's start
	hmu sync.Mutex // guards the rest
	// stopAsked: a stop signal came; a reload not yet exec'd gives way.
	stopAsked atomic.Bool
	// exe and args are how the agent was started, exe resolved then:
	// after a package upgrade /proc/self/exe names the deleted old file,
	// the path the new one.
	exe  string
	args []string

	generation      int
	envoyGeneration int
	reloads         carriedCounts // zoneproxy_reloads_total
	generations     *prometheus.GaugeVec
	last            *ReloadStatus

	// Handed over by the previous program; nil on a fresh start.
	handover *reexec.Handover
	got      *handoverState
	adopted  bool // the handed-over Envoy is adopted

	// Kept for the next program as they are made.
	wd        *workDir
	sd        *stateDir
	listeners map[string]net.Listener
	relayLn   net.Listener
	obs       *observability
	feature   XDSFeature
	cache     *xds.Cache
	envoyPath string
	envoyVer  envoy.Version
	// envoyLaunch is envoyLaunch of the running Envoy's launch.
	envoyLaunch map[string]string
	// refetch asks the control plane for a bootstrap as a start would,
	// for an Envoy of version ev; set for an adopted Envoy.
	refetch func(ctx context.Context, ev envoy.Version) ([]byte, error)
}

// launched records how the running Envoy was launched.
func (r *reloader) launched(launch map[string]string) {
	r.hmu.Lock()
	r.envoyLaunch = launch
	r.hmu.Unlock()
}

func (r *reloader) launch() map[string]string {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.envoyLaunch
}

// inheritedFile is the handed-over file name, once; nil if none.
func (r *reloader) inheritedFile(name string) *os.File {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.handover == nil {
		return nil
	}
	return r.handover.File(name)
}

// closeUnclaimed closes what was handed over and not taken.
func (r *reloader) closeUnclaimed() {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.handover != nil {
		r.handover.Close()
	}
}

func (r *reloader) keepListener(name string, ln net.Listener) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.listeners == nil {
		r.listeners = map[string]net.Listener{}
	}
	r.listeners[name] = ln
}

// adoptsEnvoy: the previous program handed over a running Envoy.
func (r *reloader) adoptsEnvoy() bool { return r.got != nil && r.got.Envoy != nil }

// handoverGeneration is the adopted Envoy's handover generation; 1 for an
// Envoy started here (or one handed over by a build that kept none).
func (r *reloader) handoverGeneration() int64 {
	if r.adoptsEnvoy() && r.got.Envoy.HandoverGeneration > 0 {
		return r.got.Envoy.HandoverGeneration
	}
	return 1
}

func (r *reloader) keepObservability(o *observability) {
	r.hmu.Lock()
	r.obs = o
	r.hmu.Unlock()
}

func (r *reloader) keepFeature(f XDSFeature) {
	r.hmu.Lock()
	r.feature = f
	r.hmu.Unlock()
}

func (r *reloader) keepStateDir(sd *stateDir) {
	r.hmu.Lock()
	r.sd = sd
	r.hmu.Unlock()
}
