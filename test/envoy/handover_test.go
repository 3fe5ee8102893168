package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// What a handover from one Envoy to a second one beside it relies on:
// both bind the zone listener through SO_REUSEPORT, the kernel spreads new
// connections over both, and once the old one stops its listeners every new
// connection reaches the new one while the old keeps what it accepted.
func TestTwoEnvoysShareAReusePortListener(t *testing.T) {
	port := freePort(t)
	_, oldSock := startWithListener(t, port, nil)
	_, newSock := startWithListener(t, port, nil)
	total := func(sock string) int64 {
		return statValue(t, sock, fmt.Sprintf("listener.127.0.0.1_%d.downstream_cx_total", port))
	}

	const n = 32
	var held []net.Conn
	for range n {
		held = append(held, dialPort(t, port))
	}
	waitFor(t, 5*time.Second, "every connection counted by one of the two", func() bool {
		return total(oldSock)+total(newSock) == n
	})
	// 32 connections all on one socket: 2 in 2^32 by the kernel's hash.
	if total(oldSock) == 0 || total(newSock) == 0 {
		t.Fatalf("connections not spread: old %d, new %d", total(oldSock), total(newSock))
	}

	adminDo(t, oldSock, "POST", "/drain_listeners")
	oldTotal, newTotal := total(oldSock), total(newSock)
	for range n {
		dialPort(t, port)
	}
	waitFor(t, 5*time.Second, "new connections on the new Envoy", func() bool { return total(newSock) == newTotal+n })
	if got := total(oldSock); got != oldTotal {
		t.Fatalf("the stopped Envoy accepted %d more", got-oldTotal)
	}
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("an accepted connection ended when the old Envoy stopped its listener: %v", err)
		}
	}
}

// SO_REUSEPORT shares a port only when every socket on it sets the option
// (and they belong to one user): otherwise the second Envoy's bind fails
// and its LDS update is rejected.
func TestReusePortOffOnEitherSideKeepsTheSecondEnvoyOut(t *testing.T) {
	on, off := wrapperspb.Bool(true), wrapperspb.Bool(false)
	for _, tt := range []struct {
		name          string
		first, second *wrapperspb.BoolValue
	}{
		{"off on the first", off, on},
		{"off on the second", on, off},
		{"off on both", off, off},
	} {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			startWithListener(t, port, tt.first)
			cp, _, _ := startCPWithListener(t, port, tt.second)
			want := fmt.Sprintf("cannot bind '127.0.0.1:%d': Address already in use", port)
			waitFor(t, 10*time.Second, "the second Envoy's NACK", func() bool { return cp.nackSeen(want) })
		})
	}
}

// startWithListener starts a stand-in, with its own control plane and admin
// socket, serving one tcp_proxy listener on port; it returns once the
// listener accepts.
func startWithListener(t *testing.T, port int, reusePort *wrapperspb.BoolValue) (*proc, string) {
	t.Helper()
	_, p, sock := startCPWithListener(t, port, reusePort)
	waitListening(t, sock)
	return p, sock
}

// startCPWithListener starts a control plane serving one tcp_proxy listener
// on port and a stand-in following it, and waits for its admin socket.
func startCPWithListener(t *testing.T, port int, reusePort *wrapperspb.BoolValue, env ...string) (*testCP, *proc, string) {
	t.Helper()
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	l := tcpProxyListener(t, "zone", port, "backend")
	l.EnableReusePort = reusePort
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{l})
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: cp.port(), CA: base64.StdEncoding.EncodeToString(p.caPEM), Token: testToken})
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	proc := startEnvoy(t, env, standardArgs(path)...)
	waitFor(t, 10*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	return cp, proc, sock
}

// waitListening waits until the stand-in is LIVE with its listener bound.
func waitListening(t *testing.T, sock string) {
	t.Helper()
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	waitFor(t, 10*time.Second, "the listener", func() bool {
		return statValue(t, sock, "listener_manager.lds.update_success") >= 1
	})
}

// Hot restart's domain sockets are abstract and per network namespace: a
// second Envoy with the same base id cannot start beside the first, which
// is why Envoys run side by side with --disable-hot-restart.
func TestHotRestartSocketsKeepASecondEnvoyOut(t *testing.T) {
	baseID := 4000 + os.Getpid()%100000
	first := []string{"--base-id", strconv.Itoa(baseID)}
	for _, tt := range []struct {
		name    string
		args    []string
		refused string
	}{
		{"same base id", first, fmt.Sprintf("unable to bind domain socket with base_id=%d, id=0, errno=98 (see --base-id option)\n", baseID*10)},
		{"hot restart disabled", []string{"--disable-hot-restart"}, ""},
		{"another base id", []string{"--base-id", strconv.Itoa(baseID + 1)}, ""},
		{"dynamic base id", []string{"--use-dynamic-base-id"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			startIdle(t, first)
			p, sock := startIdleProc(t, tt.args)
			if tt.refused != "" {
				if code := p.wait(t, 10*time.Second); code != 1 || p.stderr.String() != tt.refused {
					t.Fatalf("exit %d, stderr %q; want 1, %q", code, p.stderr.String(), tt.refused)
				}
				return
			}
			waitFor(t, 10*time.Second, "the second Envoy's admin", func() bool {
				_, _, err := adminTry(sock, "GET", "/ready")
				return err == nil
			})
		})
	}
}

// startIdle starts a stand-in with its own admin socket and no reachable
// control plane, and waits for its admin.
func startIdle(t *testing.T, args []string) {
	t.Helper()
	p, sock := startIdleProc(t, args)
	waitFor(t, 10*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil || p.exited()
	})
	if p.exited() {
		t.Fatalf("the first Envoy exited: %s", p.stderr.String())
	}
}

func startIdleProc(t *testing.T, args []string) (*proc, string) {
	t.Helper()
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{})
	return startEnvoy(t, nil, append([]string{"--config-path", path}, args...)...), filepath.Join(dir, "kuma-envoy-admin.sock")
}

// netnsChildEnv carries, into a test re-run in its own network namespace,
// the net.ipv4.tcp_migrate_req value to set there.
const netnsChildEnv = "STANDIN_TEST_TCP_MIGRATE_REQ"

// A client the kernel queued on the old Envoy's socket, not yet accepted,
// when that socket closes: Linux resets it unless net.ipv4.tcp_migrate_req
// is 1, which moves it to another socket of the same SO_REUSEPORT group.
// The stand-in's listeners are real sockets, so this is the kernel's
// behaviour; the test shows what a handover must configure. Each case runs
// in a network namespace of its own (the sysctl is per namespace).
func TestQueuedConnectionsOfAClosedListener(t *testing.T) {
	for _, tt := range []struct {
		migrate string
		reset   bool
	}{
		{"0", true},
		{"1", false},
	} {
		t.Run("tcp_migrate_req="+tt.migrate, func(t *testing.T) {
			if v := os.Getenv(netnsChildEnv); v != "" {
				if v == tt.migrate {
					queuedConnectionsOnClose(t, tt.reset)
				}
				return
			}
			runInNetns(t, tt.migrate)
		})
	}
}

func queuedConnectionsOnClose(t *testing.T, wantReset bool) {
	port := freePort(t)
	// The old Envoy's workers are busy: its clients wait in the queue.
	_, _, oldSock := startCPWithListener(t, port, nil, "ENVOY_STANDIN_HOLD_ACCEPT=1")
	waitListening(t, oldSock)
	_, newSock := startWithListener(t, port, nil)
	total := func() int64 {
		return statValue(t, newSock, fmt.Sprintf("listener.127.0.0.1_%d.downstream_cx_total", port))
	}
	const n = 32
	var conns []net.Conn
	for range n {
		conns = append(conns, dialPort(t, port))
	}
	waitFor(t, 5*time.Second, "the new Envoy's share accepted", func() bool { return total() > 0 })

	// The stand-in has closed the socket when it answers.
	adminDo(t, oldSock, "POST", "/drain_listeners")
	var resets atomic.Int64
	for _, c := range conns {
		go func() {
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, syscall.ECONNRESET) {
				resets.Add(1)
			}
		}()
	}
	if wantReset {
		waitFor(t, 5*time.Second, "every client reset or on the new Envoy", func() bool { return resets.Load()+total() == n })
		if resets.Load() == 0 {
			t.Fatal("no client was queued on the old Envoy")
		}
		return
	}
	waitFor(t, 5*time.Second, "every queued client moved to the new Envoy", func() bool { return total() == n })
	if resets.Load() != 0 {
		t.Fatalf("%d clients reset with tcp_migrate_req=1", resets.Load())
	}
}

// runInNetns re-runs this test in a new network namespace with loopback up
// and net.ipv4.tcp_migrate_req set to migrate.
func runInNetns(t *testing.T, migrate string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) is not installed")
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_migrate_req"); err != nil {
		t.Skip("net.ipv4.tcp_migrate_req needs Linux 5.14 or later")
	}
	script := `ip link set lo up && echo "$` + netnsChildEnv + `" > /proc/sys/net/ipv4/tcp_migrate_req && exec "$0" "$@"`
	cmd := exec.Command("unshare", "-n", "--", "sh", "-c", script, os.Args[0], "-test.run", "^"+strings.ReplaceAll(t.Name(), "/", "$/^")+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChildEnv+"="+migrate, prebuiltEnv+"="+envoyBin)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
}
