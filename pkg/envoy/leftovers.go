package envoy

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EndLeftovers kills this user's processes still running Envoy on
// configPath, with their process groups, and waits up to wait for them to
// be gone. They are what an earlier agent killed outright left behind
// when a wrapper started Envoy without exec: the parent-death signal
// reaches only the agent's own child. Left running, such an Envoy keeps
// the zone proxy's ports, and the new agent would refuse to start. The
// caller holds the work dir's lock, so no live agent uses configPath.
func EndLeftovers(configPath string, wait time.Duration) []int {
	pids := runningOn(configPath)
	own := syscall.Getpgrp()
	for _, pid := range pids {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != own {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !anyAlive(pids) {
			break
		}
	}
	return pids
}

// runningOn lists this user's processes whose arguments name configPath
// as Envoy's --config-path (or -c).
func runningOn(configPath string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	uid, self := uint32(os.Getuid()), os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if fi, err := os.Stat(dir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !alive(pid) {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		for i, a := range args {
			if (a == "--config-path" || a == "-c") && i+1 < len(args) && args[i+1] == configPath || a == "--config-path="+configPath {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if alive(pid) {
			return true
		}
	}
	return false
}

// alive: the process exists and still holds its files (its ports). A
// zombie leader whose other threads are still exiting does; one alone,
// waiting for its reaper, does not.
func alive(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'Z' {
		return true
	}
	tasks, err := os.ReadDir(dir + "/task")
	return err == nil && len(tasks) > 1
}
