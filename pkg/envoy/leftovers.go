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
	pids, groups := runningOn(configPath)
	own := syscall.Getpgrp()
	gone := append([]int(nil), pids...) // and their groups' members, whose ports count too
	for _, pid := range pids {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != own {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			gone = append(gone, groups[pgid]...)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !anyAlive(gone) {
			break
		}
	}
	return pids
}

// runningOn lists this user's processes whose arguments name configPath
// as Envoy's --config-path (or -c), and this user's processes by process
// group.
func runningOn(configPath string) (pids []int, groups map[int][]int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	uid, self := uint32(os.Getuid()), os.Getpid()
	groups = map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if fi, err := os.Stat(dir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil {
			groups[pgid] = append(groups[pgid], pid)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !alive(pid) {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		for i, a := range args {
			if (a == "--config-path" || a == "-c") && i+1 < len(args) && args[i+1] == configPath || a == "--config-path="+configPath {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, groups
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
