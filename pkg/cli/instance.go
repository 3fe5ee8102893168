package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
)

// instance is a running `zoneproxy run` of the configuration being checked.
type instance struct {
	pid int
	// ports it and its Envoy listen on; nil when its file descriptors
	// cannot be read (another user's process).
	ports map[int]bool
}

// findInstance finds the agent running this configuration: the one that
// locks its work dir or, with no work dir configured (systemd gives the
// unit its own), the one started with the same --config file.
func findInstance(cfg *config.Config, configFile string) *instance {
	pid := 0
	if cfg.WorkDir != "" {
		pid = workDirHolder(cfg.WorkDir)
	} else if configFile != "" {
		pid = agentWithConfig(configFile)
	}
	if pid == 0 {
		return nil
	}
	return &instance{pid: pid, ports: listeningPorts(append([]int{pid}, descendants(pid)...))}
}

// holds reports whether p is one of the instance's ports.
func (in *instance) holds(p preflight.Port) bool {
	_, port, err := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return err == nil && (in.ports == nil || in.ports[n])
}

// workDirHolder is the pid in dir's lock file if that process is an agent
// and holds the lock now (/proc/locks: testing the lock by taking it could
// make an agent starting at that moment fail).
func workDirHolder(dir string) int {
	path := filepath.Join(dir, securedir.LockFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || !isAgent(pid) {
		return 0
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[4] == strconv.Itoa(pid) && strings.HasSuffix(f[5], ":"+strconv.FormatUint(st.Ino, 10)) {
			return pid
		}
	}
	return 0
}

// agentWithConfig is the pid of a `zoneproxy run` whose --config is the
// same file as configFile, or 0.
func agentWithConfig(configFile string) int {
	want, err := os.Stat(configFile)
	if err != nil {
		return 0
	}
	for _, pid := range pids() {
		args := cmdline(pid)
		if pid == os.Getpid() || !isAgentArgs(args) {
			continue
		}
		path := flagValue(args, string(config.KeyConfig))
		if path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
			if err != nil {
				continue
			}
			path = filepath.Join(cwd, path)
		}
		if got, err := os.Stat(path); err == nil && os.SameFile(want, got) {
			return pid
		}
	}
	return 0
}

func isAgent(pid int) bool { return isAgentArgs(cmdline(pid)) }

func isAgentArgs(args []string) bool {
	return len(args) >= 2 && filepath.Base(args[0]) == "zoneproxy" && args[1] == "run"
}

// flagValue is the value of --name in args ("--name v" or "--name=v").
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func cmdline(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(raw) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimSuffix(raw, []byte{0})), "\x00")
}

func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// descendants are pid's children, theirs, and so on (Envoy, the agent's).
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range pids() {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		// The parent's pid is the second field after the ")" ending the name.
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	var out []int
	for queue := slices.Clone(children[pid]); len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// readFDLink reads a /proc/PID/fd entry; tests replace it.
var readFDLink = os.Readlink

// listeningPorts are the TCP ports the processes listen on, or nil when
// one of their file descriptor tables cannot be read.
func listeningPorts(pids []int) map[int]bool {
	inodes := map[string]bool{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			if os.IsPermission(err) {
				return nil
			}
			continue // exited meanwhile
		}
		for _, fd := range fds {
			link, err := readFDLink(dir + "/" + fd.Name())
			if os.IsPermission(err) {
				// A process that is not dumpable (one given capabilities,
				// as a unit may do) lists its descriptors but hides where
				// they lead, even from its own user: unknown, not none.
				return nil
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok && err == nil {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			// sl local_address rem_address st … inode
			f := strings.Fields(line)
			const listen = "0A"
			if len(f) < 10 || f[3] != listen || !inodes[f[9]] {
				continue
			}
			if i := strings.LastIndexByte(f[1], ':'); i >= 0 {
				if port, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil {
					ports[int(port)] = true
				}
			}
		}
	}
	return ports
}
