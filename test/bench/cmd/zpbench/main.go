// Command zpbench measures zoneproxy's own cost against the targets in
// docs/benchmarks.md: it runs a release build of the agent against the
// test control plane (in this process) and the Envoy stand-in behind a
// wrapper script that stamps the moment Envoy is launched, and prints a
// Markdown table with PASS/FAIL per figure. It exits 1 if a figure fails.
//
// Run it from the module root: `make bench`. Run counts and time windows
// come from ZPBENCH_* environment variables (see loadSettings).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// settings are the benchmark's knobs; the defaults are what the targets
// are defined with.
type settings struct {
	runs          int           // startup, RSS and drain runs with the version cache warm
	coldRuns      int           // the same with a fresh state dir each
	cachedRuns    int           // starts with the control plane down and a warm last-known-good cache
	meshRuns      int           // mesh created → launched runs
	meshPhase     time.Duration // creation falls at a random point in [0, meshPhase) after the first "waiting for mesh"
	waiters       int
	waitRounds    int           // independent rounds of the waiters figure; judged on the worst
	waitWarmup    time.Duration // until the backoff has reached --retry-max
	waitWindow    time.Duration
	idleAgents    int
	idleWindow    time.Duration
	scrapes       int   // pairs of Envoy /stats GET and MeshMetric scrape
	heavyRuns     int   // startup runs of the build that links the Envoy protos and gRPC; 0 skips it
	rsaRuns       int   // warm starts against a control plane with kuma-cp's default RSA 2048 key; 0 skips them
	restartRuns   int   // planned restarts of a zone egress, and as many SIGKILLs
	hungRuns      int   // restarts against a hung control plane
	egressRate    int   // sidecar connections per second while an egress stops
	largeRuns     int   // ingresses started per service count of the large figure
	largeServices []int // the large figure's service counts (the default configuration is always run too)
	analyze       bool
	figures       map[string]bool
	explicitSet   []string

	upgradeReloads   int // reloads in a row of the upgrade figure
	upgradeHandovers int // Envoy handovers in a row after them
}

func loadSettings() (settings, error) {
	s := settings{
		runs: 15, coldRuns: 5, cachedRuns: 15, meshRuns: 20, meshPhase: 15 * time.Second,
		waiters: 50, waitRounds: 3, waitWarmup: 10 * time.Second, waitWindow: 30 * time.Second,
		idleAgents: 3, idleWindow: 30 * time.Second, scrapes: 100,
		heavyRuns: 5, rsaRuns: 10, analyze: true,
		restartRuns: 3, hungRuns: 3, egressRate: 100, upgradeReloads: 20, upgradeHandovers: 20,
		largeRuns: 3, largeServices: []int{targetLargeServices},
		figures: allFigures(),
	}
	ints := map[string]*int{
		"ZPBENCH_RUNS": &s.runs, "ZPBENCH_COLD_RUNS": &s.coldRuns, "ZPBENCH_CACHED_RUNS": &s.cachedRuns, "ZPBENCH_MESH_RUNS": &s.meshRuns, "ZPBENCH_WAITERS": &s.waiters,
		"ZPBENCH_WAIT_ROUNDS": &s.waitRounds,
		"ZPBENCH_IDLE_AGENTS": &s.idleAgents, "ZPBENCH_HEAVY_RUNS": &s.heavyRuns, "ZPBENCH_SCRAPES": &s.scrapes,
		"ZPBENCH_RSA_RUNS":     &s.rsaRuns,
		"ZPBENCH_RESTART_RUNS": &s.restartRuns, "ZPBENCH_HUNG_RUNS": &s.hungRuns, "ZPBENCH_EGRESS_RATE": &s.egressRate,
		"ZPBENCH_LARGE_RUNS": &s.largeRuns, "ZPBENCH_UPGRADE_RELOADS": &s.upgradeReloads, "ZPBENCH_UPGRADE_HANDOVERS": &s.upgradeHandovers,
	}
	for k, p := range ints {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return s, fmt.Errorf("%s=%q: want a count", k, v)
			}
			*p = n
			s.explicitSet = append(s.explicitSet, k+"="+v)
		}
	}
	durs := map[string]*time.Duration{
		"ZPBENCH_MESH_PHASE": &s.meshPhase, "ZPBENCH_WAIT_WARMUP": &s.waitWarmup,
		"ZPBENCH_WAIT_WINDOW": &s.waitWindow, "ZPBENCH_IDLE_WINDOW": &s.idleWindow,
	}
	for k, p := range durs {
		if v := os.Getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return s, fmt.Errorf("%s=%q: want a duration such as 30s", k, v)
			}
			*p = d
			s.explicitSet = append(s.explicitSet, k+"="+v)
		}
	}
	if v := os.Getenv("ZPBENCH_LARGE_SERVICES"); v != "" {
		s.largeServices = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				return s, fmt.Errorf("ZPBENCH_LARGE_SERVICES=%q: want service counts ≥ 2, comma-separated", v)
			}
			s.largeServices = append(s.largeServices, n)
		}
		s.explicitSet = append(s.explicitSet, "ZPBENCH_LARGE_SERVICES="+v)
	}
	if v := os.Getenv("ZPBENCH_ANALYZE"); v != "" {
		s.analyze = v != "0"
		s.explicitSet = append(s.explicitSet, "ZPBENCH_ANALYZE="+v)
	}
	if v := os.Getenv("ZPBENCH_FIGURES"); v != "" {
		s.figures = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !allFigures()[f] {
				return s, fmt.Errorf("ZPBENCH_FIGURES: unknown figure %q (%s)", f, strings.Join(figureNames, ", "))
			}
			s.figures[f] = true
		}
		s.explicitSet = append(s.explicitSet, "ZPBENCH_FIGURES="+v)
	}
	if s.waitWindow < 2*time.Second || s.idleWindow < time.Second || s.waitRounds < 1 || s.waiters < 1 || s.scrapes < 1 || s.cachedRuns < 1 ||
		s.restartRuns < 1 || s.hungRuns < 1 || s.egressRate < 1 || s.largeRuns < 1 || s.upgradeReloads < 1 || s.upgradeHandovers < 1 {
		return s, fmt.Errorf("ZPBENCH_WAIT_WINDOW must be ≥ 2s, ZPBENCH_IDLE_WINDOW ≥ 1s, ZPBENCH_WAITERS, ZPBENCH_WAIT_ROUNDS, ZPBENCH_SCRAPES, ZPBENCH_CACHED_RUNS, ZPBENCH_RESTART_RUNS, ZPBENCH_HUNG_RUNS, ZPBENCH_EGRESS_RATE, ZPBENCH_LARGE_RUNS, ZPBENCH_UPGRADE_RELOADS and ZPBENCH_UPGRADE_HANDOVERS ≥ 1")
	}
	return s, nil
}

// figureNames are the figures ZPBENCH_FIGURES may pick, in report order.
var figureNames = []string{"startup", "cached", "mesh", "waiters", "idle", "scrape", "relay", "restart", "hung", "egress-stop", "egress-restart", "egress-holdback", "upgrade", "kuma-upgrade", "large"}

func allFigures() map[string]bool {
	m := map[string]bool{}
	for _, f := range figureNames {
		m[f] = true
	}
	return m
}

func main() {
	zp := flag.String("zoneproxy", "bin/zoneproxy", "zoneproxy binary to measure (a release build: make build-release)")
	standin := flag.String("envoy", "", "Envoy stand-in binary (default: build ./test/envoy)")
	flag.Parse()
	os.Exit(run(*zp, *standin))
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "zpbench: "+format+"\n", args...)
}

func run(zpPath, standinPath string) int {
	s, err := loadSettings()
	if err != nil {
		progress("%v", err)
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		progress("%v", err)
		return 2
	}
	b, err := newBed(s, root, zpPath, standinPath)
	if err != nil {
		progress("%v", err)
		return 2
	}
	defer b.close()

	rows, details := b.measure()
	b.writeReport(os.Stdout, rows, details)
	for _, r := range rows {
		if r.Result == "FAIL" {
			return 1
		}
	}
	return 0
}

// moduleRoot walks up from the working directory to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run zpbench inside the zoneproxy module (no go.mod above the working directory)")
		}
		dir = parent
	}
}

// bed is the test bed: binaries, the wrapper, the control plane.
type bed struct {
	s           settings
	root        string
	dir         string
	runDir      string // work dirs: tmpfs where there is one, as systemd's RuntimeDirectory is; short, for Envoy's admin socket
	zoneproxy   string // private copy, so a concurrent rebuild cannot change it mid-run
	origZP      string
	standin     string
	wrapper     string
	versionLine string
	cp          *controlplane.Server
	seq         int
	ports       portPicker
	started     time.Time
	loadStart   string
	execs       *execWatch // nil where the kernel's exec events are not allowed
	execsErr    error
}

func newBed(s settings, root, zpPath, standinPath string) (*bed, error) {
	dir, err := os.MkdirTemp("", "zpb-")
	if err != nil {
		return nil, err
	}
	b := &bed{s: s, root: root, dir: dir, runDir: dir, origZP: zpPath, started: time.Now(), loadStart: loadAvg()}
	fail := func(err error) (*bed, error) {
		b.close()
		return nil, err
	}
	if onTmpfs(sharedMemory) {
		if b.runDir, err = os.MkdirTemp(sharedMemory, "zpb-"); err != nil {
			return fail(err)
		}
	}
	b.zoneproxy = filepath.Join(dir, "zoneproxy")
	if err := copyFile(zpPath, b.zoneproxy); err != nil {
		return fail(fmt.Errorf("copying %s: %w (build it with make build-release)", zpPath, err))
	}
	if standinPath == "" {
		progress("building the Envoy stand-in")
		standinPath = filepath.Join(dir, "envoy-standin")
		if err := goBuild(root, nil, standinPath, "./test/envoy"); err != nil {
			return fail(err)
		}
	}
	b.standin, err = filepath.Abs(standinPath)
	if err != nil {
		return fail(err)
	}
	v, err := exec.Command(b.standin, "--version").Output()
	if err != nil {
		return fail(fmt.Errorf("%s --version: %w", b.standin, err))
	}
	b.versionLine = strings.TrimSpace(string(v))
	if b.wrapper, err = writeWrapper(dir, b.standin, b.versionLine); err != nil {
		return fail(err)
	}
	b.cp, err = controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "cp"), Meshes: []string{"payments"}})
	if err != nil {
		return fail(err)
	}
	b.execs, b.execsErr = watchExecs()
	return b, nil
}

func (b *bed) close() {
	if b.execs != nil {
		b.execs.close()
	}
	if b.cp != nil {
		_ = b.cp.Close()
	}
	_ = os.RemoveAll(b.dir)
	_ = os.RemoveAll(b.runDir)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

// goBuild builds pkg into out with the release flags; overlay (optional)
// adds files to the build without touching the tree.
func goBuild(root string, extra []string, out, pkg string) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false"}, extra...)
	args = append(args, "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return nil
}

// writeWrapper generates the Envoy the agent runs: it stamps its pid and
// the time it is executed to launch Envoy (--config-path) into
// $ZPBENCH_STAMP, answers
// --version itself like the stub the incumbent was measured with (so the
// stand-in's own start-up is not charged to the agent), and otherwise
// execs the stand-in.
func writeWrapper(dir, standin, versionLine string) (string, error) {
	script := `#!/bin/sh
for a in "$@"; do
  case "$a" in
  --version)
    date +%s%N >> "$ZPBENCH_STAMP.version"
    printf '\n%s\n\n' ` + shQuote(versionLine) + `
    exit 0 ;;
  --config-path)
    printf '%s ' "$$" >> "$ZPBENCH_STAMP"
    date +%s%N >> "$ZPBENCH_STAMP"
    [ -n "$ZPBENCH_DRY" ] && exit 0
    break ;;
  esac
done
exec ` + shQuote(standin) + ` "$@"
`
	path := filepath.Join(dir, "envoy")
	return path, os.WriteFile(path, []byte(script), 0o755)
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// machine describes where the figures were taken.
func machine() []string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return []string{
		fmt.Sprintf("CPU: %d × %s (nproc %d)", runtime.NumCPU(), model, runtime.NumCPU()),
		"kernel: Linux " + kernel,
		"Go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
}
