package main

// Test-only hooks, read from the environment (never set them in production):
//
//	ENVOY_STANDIN_VERSION_OUTPUT     replaces the whole stdout text of --version;
//	                                 /server_info reports the build it names, as
//	                                 Envoy prints and serves the same string (its
//	                                 own build when the text names none, a line
//	                                 real Envoy never prints).
//	ENVOY_STANDIN_ARGS_FILE          every invocation appends its argv (a JSON
//	                                 array, program name excluded) as one line.
//	ENVOY_STANDIN_CRASH_AFTER        duration; then exit with ENVOY_STANDIN_CRASH_CODE
//	                                 (default 1), or die by ENVOY_STANDIN_CRASH_SIGNAL
//	                                 (SEGV, ABRT, KILL, BUS, ...) if that is set.
//	ENVOY_STANDIN_IGNORE_SIGTERM=1   SIGTERM and SIGINT are ignored; only SIGKILL works.
//	ENVOY_STANDIN_WEDGE_ADMIN_AFTER  duration; then admin requests are accepted but
//	                                 never answered.
//	ENVOY_STANDIN_START_DELAY        duration slept before the admin listener is bound.
//	ENVOY_STANDIN_DUMP_ADS_HEADERS=1 each ADS stream's request headers, the
//	                                 authorization value included, are logged at
//	                                 debug level, as Envoy's router dumps them.
//	ENVOY_STANDIN_STATS_FILE         path; /stats?format=prometheus answers its
//	                                 content (hook_stats.go).
//	ENVOY_STANDIN_HOLD_ACCEPT=1      listeners are bound and listen but never
//	                                 accept, as Envoy with busy workers: clients
//	                                 wait in the kernel's accept queue.

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

type hooks struct {
	versionOutput *string
	argsFile      string
	crashAfter    time.Duration
	crashCode     int
	crashSignal   syscall.Signal
	ignoreSigterm bool
	wedgeAfter    time.Duration
	startDelay    time.Duration
	dumpHeaders   bool
	holdAccept    bool
}

// build is the build string the running stand-in reports.
func (h *hooks) build() string {
	if h.versionOutput == nil {
		return envoyBuild
	}
	_, rest, ok := strings.Cut(*h.versionOutput, "version: ")
	if build, _, _ := strings.Cut(rest, "\n"); ok && strings.TrimSpace(build) != "" {
		return strings.TrimSpace(build)
	}
	return envoyBuild
}

func loadHooks() (*hooks, error) {
	h := &hooks{crashCode: 1}
	if v, ok := os.LookupEnv("ENVOY_STANDIN_VERSION_OUTPUT"); ok {
		h.versionOutput = &v
	}
	h.argsFile = os.Getenv("ENVOY_STANDIN_ARGS_FILE")
	dur := func(name string, dst *time.Duration) error {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("envoy stand-in: bad %s=%q: %v", name, v, err)
		}
		*dst = d
		return nil
	}
	for name, dst := range map[string]*time.Duration{
		"ENVOY_STANDIN_CRASH_AFTER":       &h.crashAfter,
		"ENVOY_STANDIN_WEDGE_ADMIN_AFTER": &h.wedgeAfter,
		"ENVOY_STANDIN_START_DELAY":       &h.startDelay,
	} {
		if err := dur(name, dst); err != nil {
			return nil, err
		}
	}
	if v := os.Getenv("ENVOY_STANDIN_CRASH_CODE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("envoy stand-in: bad ENVOY_STANDIN_CRASH_CODE=%q", v)
		}
		h.crashCode = n
	}
	if v := os.Getenv("ENVOY_STANDIN_CRASH_SIGNAL"); v != "" {
		sig, ok := signalByName(v)
		if !ok {
			return nil, fmt.Errorf("envoy stand-in: bad ENVOY_STANDIN_CRASH_SIGNAL=%q", v)
		}
		h.crashSignal = sig
	}
	h.ignoreSigterm = os.Getenv("ENVOY_STANDIN_IGNORE_SIGTERM") == "1"
	h.dumpHeaders = os.Getenv("ENVOY_STANDIN_DUMP_ADS_HEADERS") == "1"
	h.holdAccept = os.Getenv("ENVOY_STANDIN_HOLD_ACCEPT") == "1"
	if err := loadStatsFileHook(); err != nil {
		return nil, err
	}
	return h, nil
}

var signalNames = map[string]syscall.Signal{
	"SEGV": syscall.SIGSEGV, "ABRT": syscall.SIGABRT, "KILL": syscall.SIGKILL, "BUS": syscall.SIGBUS,
	"ILL": syscall.SIGILL, "FPE": syscall.SIGFPE, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT,
	"QUIT": syscall.SIGQUIT, "HUP": syscall.SIGHUP, "TRAP": syscall.SIGTRAP,
}

func signalByName(s string) (syscall.Signal, bool) {
	s = strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := signalNames[s]; ok {
		return sig, true
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	return 0, false
}

func (h *hooks) recordArgs(args []string) {
	if h.argsFile == "" {
		return
	}
	if args == nil {
		args = []string{}
	}
	line, _ := json.Marshal(args)
	f, err := os.OpenFile(h.argsFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	f.Write(append(line, '\n'))
	f.Close()
}

// crash ends the process the way the hook asks, with no clean-up, like a
// real crash (the admin socket file is left behind).
func (h *hooks) crash(log *logger) {
	if h.crashSignal == 0 {
		os.Exit(h.crashCode)
	}
	if h.crashSignal == syscall.SIGSEGV {
		log.logf(lvlCritical, "backtrace", "source/server/backtrace.h:104", "Caught Segmentation fault, suspect faulting address 0x0")
	}
	dieBySignal(h.crashSignal)
}

// dieBySignal restores the default disposition (the Go runtime ignores a
// SIGSEGV sent by kill) and raises the signal.
func dieBySignal(sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		var act [4]uintptr // handler SIG_DFL, flags, restorer, mask
		syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
	syscall.Kill(os.Getpid(), sig)
	time.Sleep(2 * time.Second)
	os.Exit(128 + int(sig))
}
