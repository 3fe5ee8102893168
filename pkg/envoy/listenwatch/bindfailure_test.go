package listenwatch

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

const egressListener = "self_zoneegress_dp_ze-port"

// nack is what the relay passes on of a NACK Envoy sent.
type nack struct{ typeURL, message string }

// envoyBindNACK is Envoy's LDS NACK for a listener it could not bind
// (LdsApiImpl::onConfigUpdate around ListenSocketImpl::bind's error).
func envoyBindNACK(listener, addr, reason string) nack {
	return nack{typeURL: ListenerTypeURL,
		message: fmt.Sprintf("Error adding/updating listener(s) %s: cannot bind '%s': %s\n", listener, addr, reason)}
}

func (w *Watch) reject(n nack) { w.Rejected(n.typeURL, n.message, false) }

func TestBindErrorsAreReadFromEnvoysNACK(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want []envoyBindError
	}{
		{name: "one listener", msg: "Error adding/updating listener(s) self_zoneegress_dp_ze-port: cannot bind '0.0.0.0:10002': Address already in use\n",
			want: []envoyBindError{{listener: egressListener, addr: netip.MustParseAddrPort("0.0.0.0:10002"), shown: "0.0.0.0:10002", reason: "Address already in use"}}},
		{name: "two listeners, one IPv6", msg: "Error adding/updating listener(s) a: cannot bind '127.0.0.1:1': Address already in use\nb: cannot bind '[::1]:2': Cannot assign requested address\n",
			want: []envoyBindError{
				{listener: "a", addr: netip.MustParseAddrPort("127.0.0.1:1"), shown: "127.0.0.1:1", reason: "Address already in use"},
				{listener: "b", addr: netip.MustParseAddrPort("[::1]:2"), shown: "[::1]:2", reason: "Cannot assign requested address"}}},
		{name: "no listener name", msg: "error adding listener '0.0.0.0:10002': cannot bind '0.0.0.0:10002': Address already in use",
			want: []envoyBindError{{listener: "'0.0.0.0:10002'", addr: netip.MustParseAddrPort("0.0.0.0:10002"), shown: "0.0.0.0:10002", reason: "Address already in use"}}},
		{name: "a NACK for something else", msg: "Error adding/updating listener(s) x: Didn't find a registered implementation for 'envoy.filters.network.nope'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseBindErrors(tt.msg)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("parsed %+v, want %+v", got, tt.want)
			}
		})
	}
}

// procAddrHex writes ap as /proc/net/tcp(6) does.
func procAddrHex(ap netip.AddrPort) string {
	ip := ap.Addr()
	var b []byte
	if ip.Is4() {
		a := ip.As4()
		b = a[:]
	} else {
		a := ip.As16()
		b = a[:]
	}
	var sb strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&sb, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	return fmt.Sprintf("%s:%04X", sb.String(), ap.Port())
}

// fakeProc is a /proc tree with one listening socket of uid whose
// process, if pid is not 0, is visible.
func fakeProcTree(t *testing.T, ap netip.AddrPort, uid, pid int, comm string) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "self", "net"), 0o755))
	file := "tcp"
	if ap.Addr().Is6() {
		file = "tcp6"
	}
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		fmt.Sprintf("   0: %s 00000000:0000 0A 00000000:00000000 00:00000000 00000000 %5d        0 424242 1 0000000000000000 100 0 0 10 0\n", procAddrHex(ap), uid)
	must(os.WriteFile(filepath.Join(root, "self", "net", file), []byte(table), 0o644))
	if pid != 0 {
		dir := filepath.Join(root, strconv.Itoa(pid))
		must(os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
		must(os.Symlink("socket:[424242]", filepath.Join(dir, "fd", "7")))
		must(os.Symlink("/dev/null", filepath.Join(dir, "fd", "0")))
		must(os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	}
	return root
}

// listenInChild has another process listen on port; its pid.
func listenInChild(t *testing.T, port uint32) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=TestHelperListenOnPort")
	cmd.Env = append(os.Environ(), "LISTEN_ON_PORT="+strconv.Itoa(int(port)))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := out.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// egressWatch watches a zone egress on port; configured is what
// Options.Configured answers.
func egressWatch(t *testing.T, port uint32, configured bool) (*Watch, *observer.ObservedLogs, *state.Tracker) {
	t.Helper()
	cfg := &config.Config{Mesh: "payments", Role: config.RoleEgress, Name: "zp", Address: "127.0.0.1", EgressPort: int(port)}
	core, logs := observer.New(zap.DebugLevel)
	tracker := state.NewTracker()
	w := New(Options{Config: cfg, Log: zap.New(core), Tracker: tracker, Metrics: metrics.New(tracker),
		Configured: func() bool { return configured }})
	return w, logs, tracker
}

// noListeners is an Envoy with no listener at all.
func noListeners() Lister { return &scriptedListeners{answers: [][]string{{}}} }

// testComm is this test binary's name as /proc/<pid>/comm shows it.
func testComm() string {
	comm := filepath.Base(os.Args[0])
	return comm[:min(len(comm), 15)]
}

// A zone listener Envoy could not bind is NO_ZONE_LISTENER for that
// reason: the port, Envoy's error and who holds the port; the control
// plane (MeshIdentity, MeshService) is not blamed.
func TestBindFailureIsTheReasonForNoZoneListener(t *testing.T) {
	tests := []struct {
		name string
		// setup holds the port (or not) and returns the NACK and what the
		// detail must say.
		setup    func(t *testing.T, port uint32) (rejected nack, want []string)
		holdPort bool
		meshWord bool // the control plane's condition is what it says
	}{
		{name: "held by a process the agent sees", setup: func(t *testing.T, port uint32) (nack, []string) {
			pid := listenInChild(t, port)
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			return envoyBindNACK(egressListener, addr, "Address already in use"),
				[]string{fmt.Sprintf("could not bind listener %s to port %d (%s: Address already in use)", egressListener, port, addr),
					fmt.Sprintf("another process listens on it: pid %d (%s)", pid, testComm()), "restarts Envoy as soon as the port is free"}
		}},
		{name: "held by another user's process the agent cannot see", holdPort: true, setup: func(t *testing.T, port uint32) (nack, []string) {
			ap := netip.MustParseAddrPort(fmt.Sprintf("0.0.0.0:%d", port))
			procnet.Proc = fakeProcTree(t, ap, 0, 0, "")
			return envoyBindNACK(egressListener, ap.String(), "Address already in use"),
				[]string{fmt.Sprintf("port %d (0.0.0.0:%d: Address already in use)", port, port), "a process of user root (uid 0) that the agent cannot see"}
		}},
		{name: "held by a process of the fake tree", holdPort: true, setup: func(t *testing.T, port uint32) (nack, []string) {
			ap := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", port))
			procnet.Proc = fakeProcTree(t, ap, 1000, 31337, "nc")
			return envoyBindNACK(egressListener, ap.String(), "Address already in use"), []string{"pid 31337 (nc)"}
		}},
		{name: "the NACK names no listener: matched by port", holdPort: true, setup: func(t *testing.T, port uint32) (nack, []string) {
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			r := nack{typeURL: ListenerTypeURL, message: fmt.Sprintf("error adding listener '%s': cannot bind '%s': Address already in use", addr, addr)}
			return r, []string{fmt.Sprintf("could not bind listener %s to port %d", egressListener, port)}
		}},
		{name: "an address not on this host", setup: func(t *testing.T, port uint32) (nack, []string) {
			return envoyBindNACK(egressListener, fmt.Sprintf("192.0.2.7:%d", port), "Cannot assign requested address"),
				[]string{"Cannot assign requested address): the address is not on this host; the agent restarts Envoy as soon as it is"}
		}},
		{name: "a failure the agent does not retry", setup: func(t *testing.T, port uint32) (nack, []string) {
			return envoyBindNACK(egressListener, fmt.Sprintf("127.0.0.1:%d", port), "Permission denied"),
				[]string{"Permission denied); fix that, then restart the zone proxy"}
		}},
		{name: "another listener's bind is not the zone listener's", meshWord: true, setup: func(t *testing.T, port uint32) (nack, []string) {
			return envoyBindNACK("system_meshmetric_prometheus_default", "0.0.0.0:5670", "Address already in use"), []string{"MeshIdentity"}
		}},
		{name: "a NACK of clusters is not a bind", meshWord: true, setup: func(t *testing.T, port uint32) (nack, []string) {
			r := envoyBindNACK(egressListener, fmt.Sprintf("127.0.0.1:%d", port), "Address already in use")
			r.typeURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
			return r, []string{"MeshIdentity"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func(old string) { procnet.Proc = old }(procnet.Proc)
			var port uint32
			if tt.holdPort {
				_, port = testutil.HoldPort(t)
			} else {
				ln, p := testutil.HoldPort(t)
				ln.Close() // a port nobody holds, for the child to take
				port = p
			}
			rejected, want := tt.setup(t, port)
			w, logs, tracker := egressWatch(t, port, true)
			p := w.Serving(noListeners(), 0)
			w.reject(rejected)
			p.Check(context.Background())
			snap := tracker.Current()
			if snap.Phase != state.NoZoneListener {
				t.Fatalf("phase %s (%s), want NO_ZONE_LISTENER", snap.Phase, snap.Detail)
			}
			t.Logf("NO_ZONE_LISTENER: %s", snap.Detail)
			for _, s := range want {
				if !strings.Contains(snap.Detail, s) {
					t.Errorf("detail %q\nwant it to contain %q", snap.Detail, s)
				}
			}
			if strings.Contains(snap.Detail, "MeshIdentity") != tt.meshWord {
				t.Errorf("detail %q: blames MeshIdentity %v, want %v", snap.Detail, !tt.meshWord, tt.meshWord)
			}
			if !tt.meshWord && logs.FilterMessageSnippet("could not bind a zone listener").Len() != 1 {
				t.Error("the rejected bind was not logged")
			}
			select {
			case <-p.RebindDue():
				t.Fatal("a restart was asked for while the port is not free")
			default:
			}
		})
	}
}

// Once the port of a rejected zone listener is free, the watch asks for a
// restart of Envoy at once; the restart forgets the old Envoy's failure.
// A port taken again right after is retried no sooner than the backoff.
func TestFreedPortRestartsEnvoyPaced(t *testing.T) {
	holder, port := testutil.HoldPort(t)
	w, logs, tracker := egressWatch(t, port, true)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := w.Serving(noListeners(), 0)
	w.reject(envoyBindNACK(egressListener, addr, "Address already in use"))
	p.Check(context.Background())
	if asked(p) {
		t.Fatal("a restart was asked for while the port is held")
	}
	holder.Close()
	p.Check(context.Background())
	if !asked(p) {
		t.Fatalf("no restart asked for once the port was free (%s)", tracker.Current().Detail)
	}
	p.Check(context.Background()) // asked once only: the channel is closed once
	if got, want := w.RestartReason(), "listener "+egressListener+" on port "+strconv.Itoa(int(port)); got != want {
		t.Errorf("the restart is for %q, want %q", got, want)
	}

	w.Restarted(time.Now())
	if w.binds.failure(egressListener) != nil {
		t.Fatal("the old Envoy's failure outlived it")
	}
	if w.RestartReason() != "" {
		t.Error("the restart done is still pending")
	}

	// The new Envoy could not bind it either (taken again meanwhile), and it
	// is free again at once: the next restart waits for the backoff.
	p = w.Serving(noListeners(), 0)
	w.reject(envoyBindNACK(egressListener, addr, "Address already in use"))
	p.Check(context.Background())
	if asked(p) {
		t.Fatal("restarted again without waiting for the backoff")
	}
	if logs.FilterMessageSnippet("restarting it again later").Len() != 1 {
		t.Error("the wait is not said")
	}
	b := &w.binds
	b.mu.Lock()
	b.last = b.last.Add(-rebindBackoff)
	b.mu.Unlock()
	p.Check(context.Background())
	if !asked(p) {
		t.Fatal("no restart after the backoff")
	}

	// Every zone listener in Envoy: the pacing starts over.
	w.Restarted(time.Now())
	p = w.Serving(&scriptedListeners{answers: [][]string{{egressListener}}}, 0)
	p.Check(context.Background())
	if ok, _ := b.mayRestart(time.Now()); !ok {
		t.Fatal("the pacing did not start over once the listener was in Envoy")
	}
}

// A failure the agent cannot see the end of is not retried by restarts.
func TestUnretryableBindFailureRestartsNothing(t *testing.T) {
	_, port := testutil.HoldPort(t)
	w, _, _ := egressWatch(t, port, true)
	p := w.Serving(noListeners(), 0)
	// The port is free for the agent, but Envoy was refused.
	w.reject(envoyBindNACK(egressListener, "127.0.0.1:1", "Permission denied"))
	p.Check(context.Background())
	if asked(p) {
		t.Fatal("restarted for a failure a restart does not mend")
	}
}

func asked(p *Period) bool {
	select {
	case <-p.RebindDue():
		return true
	default:
		return false
	}
}

// A freed port waits for a restart while a new Envoy would get no
// configuration (Options.Configured). Envoy's other listeners keep
// serving meanwhile.
func TestFreedPortWaitsForConfigurationToRestartEnvoy(t *testing.T) {
	for _, configured := range []bool{true, false} {
		t.Run(fmt.Sprintf("configured %v", configured), func(t *testing.T) {
			ln, port := testutil.HoldPort(t)
			ln.Close() // free
			w, logs, _ := egressWatch(t, port, configured)
			p := w.Serving(noListeners(), 0)
			w.reject(envoyBindNACK(egressListener, fmt.Sprintf("127.0.0.1:%d", port), "Address already in use"))
			p.Check(context.Background())
			p.Check(context.Background())
			if asked(p) != configured {
				t.Fatalf("restart asked %v, want %v", asked(p), configured)
			}
			if n := logs.FilterMessageSnippet("a new Envoy would get no configuration").Len(); (n == 1) == configured || n > 1 {
				t.Errorf("%d lines about the wait", n)
			}
		})
	}
}
