package upgrade

import (
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

// heldRig is what an agent holds: dirs, a listener, and an Envoy's files.
type heldRig struct {
	h        Holdings
	flushed  bool
	flushErr error
	output   *os.File
}

func newHeldRig(t *testing.T) *heldRig {
	t.Helper()
	open := func() *os.File {
		f, err := os.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	listen := func(network, addr string) net.Listener {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	r := &heldRig{output: open()}
	r.h = Holdings{Generation: 3, EnvoyGeneration: 2, WorkDir: Dir{Path: "/run/zp", File: open(), Lock: open()}, TemporaryWorkDir: true,
		StateDir:  &Dir{Path: "/var/lib/zp", File: open(), Lock: open()},
		Listeners: map[string]net.Listener{"--readiness-port": listen("tcp", "127.0.0.1:0")},
		Reloads:   map[string]float64{ResultOK: 2}, Handovers: map[string]float64{"success": 1},
		Envoy: &HeldEnvoy{State: EnvoyState{PID: 42, Path: "/usr/bin/envoy", HandoverGeneration: 2, Slot: SlotB, Relayed: true},
			Output: r.output, Relay: listen("unix", t.TempDir()+"/relay.sock"), AccessLog: open(),
			MeshMetric: func() (*os.File, error) { return ListenerFile(listen("unix", t.TempDir()+"/mm.sock")) },
			Flush:      func() error { r.flushed = true; return r.flushErr }},
	}
	return r
}

// What a reload hands over: the dirs and the agent's listeners always;
// with Envoy, its output, the relay's socket, the observability files and
// its place in the handovers, the cache written out first.
func TestWhatAReloadHandsOver(t *testing.T) {
	base := []string{"--readiness-port", FileStateDir, FileStateLock, FileWorkDir, FileWorkLock}
	for _, tc := range []struct {
		name    string
		change  func(r *heldRig)
		files   []string
		flushed bool
	}{
		{"waiting for the mesh", func(r *heldRig) { r.h.Envoy = nil; r.h.StateDir = nil }, []string{"--readiness-port", FileWorkDir, FileWorkLock}, false},
		{"serving through the relay", func(*heldRig) {}, append(slices.Clone(base), FileAccessLog, FileEnvoyOutput, FileMeshMetric, FileRelay), true},
		{"serving directly", func(r *heldRig) { r.h.Envoy.State.Relayed = false }, append(slices.Clone(base), FileAccessLog, FileEnvoyOutput, FileMeshMetric), false},
		{"without observability", func(r *heldRig) { r.h.Envoy.MeshMetric = nil; r.h.Envoy.AccessLog = nil },
			append(slices.Clone(base), FileEnvoyOutput, FileRelay), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHeldRig(t)
			tc.change(r)
			st, files, err := Gather(r.h)
			if err != nil {
				t.Fatal(err)
			}
			defer files.CloseDups()
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range files.Open() {
					if !yield(n) {
						return
					}
				}
			})
			slices.Sort(tc.files)
			if !slices.Equal(names, tc.files) || r.flushed != tc.flushed {
				t.Fatalf("handed over %v (cache written %v), want %v (%v)", names, r.flushed, tc.files, tc.flushed)
			}
			if st.Version != Version || st.Generation != 3 || st.WorkDir != "/run/zp" || !st.Temporary || st.Reloads[ResultOK] != 2 || st.Handovers["success"] != 1 {
				t.Fatalf("state %+v", st)
			}
			if r.h.Envoy != nil && (st.Envoy == nil || st.Envoy.PID != 42 || st.Envoy.Place() != (Place{2, SlotB})) {
				t.Fatalf("Envoy handed over as %+v", st.Envoy)
			}
		})
	}
}

// A reload that cannot hand something over is refused, and closes what it
// made for the handover.
func TestWhatAReloadCannotHandOver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *heldRig)
		says   string
	}{
		{"Envoy's output", func(r *heldRig) { r.h.Envoy.Output = nil }, "Envoy's output cannot be handed over"},
		{"the relay's socket", func(r *heldRig) { r.h.Envoy.Relay = nil }, "cannot hand over the relay's socket: not a socket"},
		{"the MeshMetric socket", func(r *heldRig) {
			r.h.Envoy.MeshMetric = func() (*os.File, error) { return nil, errors.New("closed") }
		}, "cannot hand over the MeshMetric socket: closed"},
		{"the cache", func(r *heldRig) { r.flushErr = errors.New("disk full") }, "configuration the new program would serve Envoy cannot be written: disk full"},
		{"a listener", func(r *heldRig) { r.h.Listeners["--metrics-port"] = nil }, "cannot hand over the --metrics-port listener: not a socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHeldRig(t)
			tc.change(r)
			_, files, err := Gather(r.h)
			if err == nil || !strings.Contains(err.Error(), tc.says) || files != nil {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}
