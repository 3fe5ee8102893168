package listenwatch

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

type scriptedListeners struct {
	answers [][]string // one per call; nil = an error
	call    int
}

func (s *scriptedListeners) Listeners(context.Context) ([]envoy.Listener, error) {
	a := s.answers[min(s.call, len(s.answers)-1)]
	s.call++
	if a == nil {
		return nil, errors.New("admin unreachable")
	}
	out := make([]envoy.Listener, len(a))
	for i, n := range a {
		out[i] = envoy.Listener{Name: n, Address: "127.0.0.1:1"}
	}
	return out, nil
}

func TestZoneListenersKeepReadyHonest(t *testing.T) {
	const (
		zi = "self_zoneingress_dp_zi-port"
		ze = "self_zoneegress_dp_ze-port"
	)
	tests := []struct {
		name       string
		role       config.Role
		answers    [][]string
		wantPhases []state.Phase // after each check
		wantDetail string        // in the last NO_ZONE_LISTENER detail
		wantWarns  int
	}{
		{name: "egress with its listener", role: config.RoleEgress, answers: [][]string{{ze}},
			wantPhases: []state.Phase{state.Ready}},
		{name: "egress without: the fix is named", role: config.RoleEgress, answers: [][]string{{}, {}, {}},
			wantPhases: []state.Phase{state.NoZoneListener, state.NoZoneListener, state.NoZoneListener},
			wantDetail: "MeshIdentity selects this proxy and the mesh has a MeshExternalService", wantWarns: 1},
		{name: "ingress listener arrives later", role: config.RoleIngress, answers: [][]string{{"system_dynamicconfig"}, {zi}},
			wantPhases: []state.Phase{state.NoZoneListener, state.Ready}, wantDetail: "only when this zone has a MeshService", wantWarns: 1},
		{name: "combined missing one", role: config.RoleCombined, answers: [][]string{{zi}},
			wantPhases: []state.Phase{state.NoZoneListener}, wantDetail: "Envoy has no listener " + ze, wantWarns: 1},
		{name: "listener removed later", role: config.RoleEgress, answers: [][]string{{ze}, {}},
			wantPhases: []state.Phase{state.Ready, state.NoZoneListener}, wantWarns: 1},
		{name: "an unanswered check changes nothing", role: config.RoleEgress, answers: [][]string{{}, nil, {ze}},
			wantPhases: []state.Phase{state.NoZoneListener, state.NoZoneListener, state.Ready}, wantWarns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Mesh: "payments", Role: tt.role, Name: "zp", Address: "127.0.0.1", IngressPort: 10001, EgressPort: 10002}
			core, logs := observer.New(zap.DebugLevel)
			tracker := state.NewTracker()
			m := metrics.New(tracker)
			w := New(Options{Config: cfg, Log: zap.New(core), Tracker: tracker, Metrics: m}).Serving(&scriptedListeners{answers: tt.answers}, 0)
			var detail string
			for i, want := range tt.wantPhases {
				w.Check(context.Background())
				snap := tracker.Current()
				if snap.Phase != want {
					t.Fatalf("check %d: phase %s, want %s (%s)", i, snap.Phase, want, snap.Detail)
				}
				if snap.Phase == state.NoZoneListener {
					detail = snap.Detail
				}
			}
			if !strings.Contains(detail, tt.wantDetail) {
				t.Errorf("detail %q, want it to contain %q", detail, tt.wantDetail)
			}
			if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != tt.wantWarns {
				t.Errorf("%d warnings, want %d (once per change)", n, tt.wantWarns)
			}
		})
	}
}

// A MeshMetric Prometheus port that another process also listens on (a
// second zone proxy of another mesh, with SO_REUSEPORT) is warned about,
// once per change.
func TestSharedMeshMetricPortIsWarnedOnce(t *testing.T) {
	ours, err := reusePort.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	port := ours.Addr().(*net.TCPAddr).Port
	addr := ours.Addr().String()
	cfg := &config.Config{Mesh: "payments", Role: config.RoleEgress, Name: "zp", Address: "127.0.0.1", EgressPort: 10002}
	core, logs := observer.New(zap.DebugLevel)
	lister := &fixedListeners{{Name: "self_zoneegress_dp_ze-port"}, {Name: "system_meshmetric_prometheus_default-backend", Address: addr}}
	w := New(Options{Config: cfg, Log: zap.New(core), Tracker: state.NewTracker()}).Serving(lister, os.Getpid())
	w.Check(context.Background())
	if n := logs.FilterMessageSnippet("MeshMetric Prometheus listener").Len(); n != 0 {
		t.Fatalf("warned while only this process listens (%d)", n)
	}

	// Another zone proxy: a child process listening on the same port.
	cmd := exec.Command(os.Args[0], "-test.run=TestHelperListenOnPort")
	cmd.Env = append(os.Environ(), "LISTEN_ON_PORT="+strconv.Itoa(port))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := out.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	// This process plays Envoy: its socket is ours, the child's is foreign.
	// Two scans (the second forced past the pacing) warn only once.
	w.lastShare = time.Time{}
	w.Check(context.Background())
	w.lastShare = time.Time{}
	w.Check(context.Background())
	if n := logs.FilterMessageSnippet("MeshMetric Prometheus listener").Len(); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
}

// reusePort listens with SO_REUSEPORT, as Envoy does on kuma-cp's MeshMetric listeners.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf, 1) })
}}

type fixedListeners []envoy.Listener

func (f *fixedListeners) Listeners(context.Context) ([]envoy.Listener, error) { return *f, nil }

func TestHelperListenOnPort(t *testing.T) {
	port := os.Getenv("LISTEN_ON_PORT")
	if port == "" {
		t.Skip("helper process")
	}
	// A second Envoy on the same address and port, as SO_REUSEPORT allows.
	ln, err := reusePort.Listen(context.Background(), "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Stdout.WriteString("bound\n")
	select {}
}
