package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// userHZ is the unit of utime/stime in /proc/<pid>/stat; fixed at 100 on
// Linux whatever the kernel's HZ.
const userHZ = 100

// memStatus is the agent's memory from /proc/<pid>/status, in KiB.
type memStatus struct {
	RSS, Anon, File, HWM int64
	Threads              int64
}

func readMem(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	var m memStatus
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			m.RSS = n
		case "RssAnon":
			m.Anon = n
		case "RssFile":
			m.File = n
		case "VmHWM":
			m.HWM = n
		case "Threads":
			m.Threads = n
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return m, nil
}

// cpuTicks is utime+stime of pid from /proc/<pid>/stat, in 1/userHZ s.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	// Fields after the command name start at field 3 (state); utime and
	// stime are fields 14 and 15.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime in /proc/%d/stat", pid)
	}
	return u + st, nil
}

// cpuNanos sums the on-CPU time of pid's live threads from schedstat:
// nanosecond resolution, as a cross-check of the tick counts.
func cpuNanos(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for pid %d", pid)
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just exited
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += n
		}
	}
	return sum, nil
}

// processesMentioning lists live pids whose command line contains s (a
// run's unique work dir), to find anything a run left behind.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), s) || harness.ProcessGone(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// Ports are picked below the kernel's ephemeral range (32768 and up by
// default): the agents' own client connections take ephemeral ports and
// could otherwise grab a port chosen for another agent before it binds it.
const (
	portLow  = 20000
	portHigh = 32000
)

// portPicker hands out loopback ports nobody listens on, never the same
// one twice in a run.
type portPicker struct {
	used map[int]bool
}

func (pp *portPicker) next() (int, error) {
	if pp.used == nil {
		pp.used = map[int]bool{}
	}
	for range 1000 {
		port := portLow + rand.IntN(portHigh-portLow)
		if pp.used[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		pp.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", portLow, portHigh)
}

// loadAvg is /proc/loadavg's first three fields: how busy the machine was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func waitUntil(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
