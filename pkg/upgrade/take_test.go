package upgrade

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
)

// fakeHandover is reexec.Handover's part that Take reads.
type fakeHandover struct {
	state  string
	files  map[string]*os.File
	closed bool
}

func (h *fakeHandover) State(v any) error {
	if h.state == "" {
		return errors.New("no state was handed over")
	}
	return json.Unmarshal([]byte(h.state), v)
}

func (h *fakeHandover) File(name string) *os.File {
	f := h.files[name]
	delete(h.files, name)
	return f
}

func (h *fakeHandover) Close() {
	h.closed = true
	for _, f := range h.files {
		f.Close()
	}
}

// What the previous program handed over is read, or refused whole (and
// its files closed) when this build cannot read it.
func TestTakeReadsOrRefusesTheHandover(t *testing.T) {
	for _, tc := range []struct {
		name, state, refusal string
		adopts               bool
	}{
		{"an Envoy handed over", `{"version":1,"generation":2,"workDir":"/run/zp","envoy":{"pid":42}}`, "", true},
		{"no Envoy yet", `{"version":1,"generation":2,"workDir":"/run/zp"}`, "", false},
		{"another version", `{"version":2}`, "handed over version 2 of its state; this build reads version 1", false},
		{"no state", ``, "cannot read what the previous agent handed over", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandover{state: tc.state}
			taken, err := Take(h)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) || !h.closed {
					t.Fatalf("got %v (handover closed %v), want a refusal saying %q", err, h.closed, tc.refusal)
				}
				return
			}
			if err != nil || taken.AdoptsEnvoy() != tc.adopts || taken.State.Generation != 2 {
				t.Fatalf("got %+v, %v", taken, err)
			}
		})
	}
}

// A fresh start was handed nothing: every question has the fresh answer.
func TestAFreshStartTakesNothing(t *testing.T) {
	var taken *Taken
	if taken.AdoptsEnvoy() || taken.File(FileWorkDir) != nil || taken.EnvoyFile(FileRelay) != nil || taken.Listener("--readiness-port", "127.0.0.1:1") != nil {
		t.Fatal("a fresh start adopts something")
	}
	if p := taken.Place(); p != (Place{Generation: 1, Slot: SlotA}) {
		t.Fatalf("a fresh start's Envoy at %+v", p)
	}
	d, lock, handed, err := taken.LockedDir(FileWorkDir, FileWorkLock, func(st *State) string { return st.WorkDir })
	if d != nil || lock != nil || handed || err != nil {
		t.Fatalf("a fresh start adopts a work dir: %v %v %v %v", d, lock, handed, err)
	}
	taken.CloseUnclaimed()
}

// A handed-over listener is taken when it listens on the address asked
// for still; on another (a changed port) it is closed, and the agent
// listens anew. Files only an adopted Envoy uses are not taken without one.
func TestTakenListenersAndFiles(t *testing.T) {
	handOver := func(t *testing.T) (*os.File, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ListenerFile(ln)
		if err != nil {
			t.Fatal(err)
		}
		return f, ln.Addr().String()
	}
	for _, tc := range []struct {
		name  string
		moved bool
	}{{"the same address", false}, {"a moved port", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := handOver(t)
			if tc.moved {
				addr = "127.0.0.1:1"
			}
			taken := &Taken{h: &fakeHandover{files: map[string]*os.File{"--readiness-port": f}}}
			ln := taken.Listener("--readiness-port", addr)
			if (ln == nil) != tc.moved {
				t.Fatalf("taken %v, want taken %v", ln, !tc.moved)
			}
			if ln != nil {
				ln.Close()
			}
			if taken.File("--readiness-port") != nil {
				t.Fatal("a file was taken twice")
			}
		})
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := &fakeHandover{state: `{"version":1}`, files: map[string]*os.File{FileRelay: r}}
	taken, err := Take(h)
	if err != nil {
		t.Fatal(err)
	}
	if taken.EnvoyFile(FileRelay) != nil {
		t.Fatal("the relay's socket taken without an Envoy")
	}
	taken.CloseUnclaimed()
	if !h.closed {
		t.Fatal("what was not taken stays open")
	}
}

// A handed-over Unix socket removes its file when closed, as the one it
// replaces would have.
func TestAHandedOverUnixListenerRemovesItsSocket(t *testing.T) {
	path := t.TempDir() + "/relay.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	f, err := ListenerFile(ln)
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	taken, err := UnixListener(f)
	if err != nil {
		t.Fatal(err)
	}
	taken.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket is left: %v", err)
	}
}
