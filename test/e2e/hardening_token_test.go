package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// tokenFileArgs is p's command line without --dataplane-token-file.
func tokenFileArgs(zone *harness.Zone, p harness.Proxy) []string {
	args := zone.Args(p)
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--dataplane-token-file" {
			return append(args[:i:i], args[i+2:]...)
		}
	}
	return args
}

// A token file that is no regular file (a named pipe, a process
// substitution, a device, a directory) or holds more than a token can is
// refused at start, at once and without being read: exit 78, naming
// --dataplane-token-file and what to give instead. (Before, /dev/zero grew
// the agent by gigabytes, a pipe without a writer held it in open() past
// SIGTERM, and a process substitution was read up by validation.)
func TestHardeningTokenFileMustBeARegularFile(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	dir := harness.ShortTempDir(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	overCap := filepath.Join(dir, "over-cap")
	if err := os.WriteFile(overCap, []byte(strings.Repeat("x", 64<<10+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse") // 1 TB, without a byte on disk
	if f, err := os.OpenFile(sparse, os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
		t.Fatal(err)
	} else {
		err := f.Truncate(1 << 40)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	tokens := zone.NewProxy("payments", "egress").TokenFile
	const regular = "not a regular file: the token file must be a regular file"
	cases := []struct {
		name, file string
		says       []string
	}{
		{"a named pipe without a writer", fifo, []string{fifo + " is a named pipe (FIFO), " + regular}},
		{"/dev/zero", "/dev/zero", []string{"/dev/zero is a character device, " + regular}},
		{"a link to /dev/zero", zero, []string{zero + " is a character device, " + regular}},
		{"a directory", dir, []string{dir + " is a directory, " + regular}},
		{"larger than a token", overCap, []string{overCap + ": it holds 65537 bytes or more, more than the 64 KiB a token file may hold", "give the file that holds only the token"}},
		{"a 1 TB sparse file", sparse, []string{"it holds 1099511627776 bytes or more, more than the 64 KiB"}},
		{"a process substitution", "<(cat " + tokens + ")", []string{"is a named pipe (FIFO), " + regular}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := zone.NewProxy("payments", "egress")
			var agent *harness.Agent
			if strings.HasPrefix(tc.file, "<(") {
				// As an operator's shell runs it: /dev/fd/63, a pipe.
				script := `exec "$0" "$@" --dataplane-token-file ` + tc.file
				agent = harness.StartAgent(t, "/bin/bash", nil, append([]string{"-c", script, bins.Zoneproxy}, tokenFileArgs(zone, p)...)...)
			} else {
				p.TokenFile = tc.file
				agent = zone.Start(p, nil)
			}
			code := agent.Wait(promptly)
			out := agent.Output()
			if code != 78 || !strings.Contains(out, "--dataplane-token-file: ") {
				t.Fatalf("exit %d, want 78 naming --dataplane-token-file\n%s", code, out)
			}
			for _, w := range tc.says {
				if !strings.Contains(out, w) {
					t.Errorf("the agent does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "unreachable") || len(zone.CP.BootstrapRequests()) > 0 {
				t.Errorf("the control plane was asked, or blamed:\n%s", out)
			}
		})
	}
}

// replaceTokenFile puts what make creates at path in place of the token
// file, atomically, as a rotation would.
func replaceTokenFile(t *testing.T, path string, make func(path string) error) {
	t.Helper()
	tmp := path + ".new"
	_ = os.Remove(tmp)
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// While the agent waits for the mesh, a token file replaced by a pipe, a
// device or a huge file is refused at each attempt without being read and
// retried, as a rotation is: the control plane is not asked, nor blamed.
// The agent stays small and stops promptly on SIGTERM.
func TestHardeningTokenFileReplacedWhileWaiting(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins) // no mesh: the agent keeps asking
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)

	replaceTokenFile(t, p.TokenFile, mkfifo)
	agent.AwaitLog(p.TokenFile+" (is it being rotated?); retrying: it is a named pipe (FIFO), not a regular file", promptly)
	asked := len(zone.CP.BootstrapRequests())
	replaceTokenFile(t, p.TokenFile, func(path string) error { return os.Symlink("/dev/zero", path) })
	agent.AwaitLog("it is a character device, not a regular file", promptly)
	replaceTokenFile(t, p.TokenFile, func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(1 << 40)
	})
	agent.AwaitLog("it holds 1099511627776 bytes or more, more than the 64 KiB", promptly)
	if agent.Exited() {
		t.Fatalf("the agent stopped instead of retrying:\n%s", agent.Output())
	}
	if n := len(zone.CP.BootstrapRequests()); n != asked {
		t.Errorf("the control plane was asked %d times without a token", n-asked)
	}
	if rss := peakRSS(t, agent.PID()); rss > 200<<20 {
		t.Errorf("the agent grew to %d MB", rss>>20)
	}
	if out := agent.Output(); strings.Contains(out, "unreachable") {
		t.Errorf("the control plane is blamed:\n%s", out)
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, agent.Output())
	}
}

// With Envoy live, the relay reads the token file for every new stream:
// replaced by a pipe nobody writes, it is refused and retried, and
// SIGTERM stops the agent promptly.
func TestHardeningTokenPipeWhileLive(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil)
	replaceTokenFile(t, p.TokenFile, mkfifo)
	if err := zone.CP.Restart(0); err != nil { // the stream reconnects
		t.Fatal(err)
	}
	agent.AwaitLog("reading the dataplane token: --dataplane-token-file: cannot read "+p.TokenFile+" (is it being rotated?): it is a named pipe (FIFO), not a regular file", promptly)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, agent.Output())
	}
}

// peakRSS is the most memory pid has held (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
