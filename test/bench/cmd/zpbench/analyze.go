package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// buildTags are the -tags the binary under test was built with, so that
// the builds it is compared with differ from it only where they mean to.
func buildTags(bin string) []string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && s.Value != "" {
			return []string{"-tags", s.Value}
		}
	}
	return nil
}

// heavyModules are what the test bed links and the agent should not.
var heavyModules = []string{
	"github.com/envoyproxy/go-control-plane",
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
	"github.com/cncf/xds",
}

// heavyOverlay is added to cmd/zoneproxy (through -overlay, never on
// disk in the tree) for the comparison build: what an agent that parsed
// the bootstrap as Envoy protos and carried an xDS/gRPC server would link.
const heavyOverlay = `package main

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/encoding/protojson"
)
`

// binaryFacts describes a built zoneproxy.
type binaryFacts struct {
	size     int64
	stripped bool
	cgo      string
	goVer    string
	deps     []string // module paths
	heavy    []string // heavyModules it links
}

func inspectBinary(path string) (binaryFacts, error) {
	var f binaryFacts
	st, err := os.Stat(path)
	if err != nil {
		return f, err
	}
	f.size = st.Size()
	ef, err := elf.Open(path)
	if err != nil {
		return f, err
	}
	f.stripped = ef.Section(".symtab") == nil
	ef.Close()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return f, err
	}
	f.goVer = bi.GoVersion
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" {
			f.cgo = s.Value
		}
	}
	for _, d := range bi.Deps {
		f.deps = append(f.deps, d.Path)
		for _, h := range heavyModules {
			if d.Path == h || strings.HasPrefix(d.Path, h+"/") {
				f.heavy = append(f.heavy, d.Path)
			}
		}
	}
	return f, nil
}

// initTrace is GODEBUG=inittrace=1 of `zoneproxy version`, median of runs.
type initTrace struct {
	totalMs  float64 // sum of init clock time
	allocKB  float64
	top      []pkgCost
	execToMs float64 // exec → exit of `zoneproxy version`
}

type pkgCost struct {
	name string
	v    float64
}

func traceInit(bin string, runs int) (initTrace, error) {
	var totals, allocs, wall []float64
	per := map[string][]float64{}
	for i := 0; i < runs; i++ {
		cmd := exec.Command(bin, "version")
		cmd.Env = append(agentEnv(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			return initTrace{}, fmt.Errorf("%s version: %v", bin, err)
		}
		wall = append(wall, ms(time.Since(t0)))
		var total, bytesTotal float64
		sc := bufio.NewScanner(&stderr)
		for sc.Scan() {
			// init <pkg> @<t> ms, <clock> ms clock, <bytes> bytes, <allocs> allocs
			f := strings.Fields(sc.Text())
			if len(f) < 8 || f[0] != "init" {
				continue
			}
			clock, _ := strconv.ParseFloat(f[4], 64)
			b, _ := strconv.ParseFloat(f[7], 64)
			total += clock
			bytesTotal += b
			per[f[1]] = append(per[f[1]], clock)
		}
		totals = append(totals, total)
		allocs = append(allocs, bytesTotal/1024)
	}
	tr := initTrace{totalMs: summarize(totals).Median, allocKB: summarize(allocs).Median, execToMs: summarize(wall).Median}
	for name, xs := range per {
		tr.top = append(tr.top, pkgCost{name, summarize(xs).Median})
	}
	sort.Slice(tr.top, func(i, j int) bool { return tr.top[i].v > tr.top[j].v })
	if len(tr.top) > 5 {
		tr.top = tr.top[:5]
	}
	return tr, nil
}

// sizeByModule attributes the file-backed symbol bytes of an unstripped
// build to modules (the standard library by top-level package); BSS is
// left out because it takes no room in the file.
func sizeByModule(bin string, modules []string) ([]pkgCost, float64, error) {
	ef, err := elf.Open(bin)
	if err != nil {
		return nil, 0, err
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(modules, func(i, j int) bool { return len(modules[i]) > len(modules[j]) })
	sums := map[string]float64{}
	var total float64
	for _, sym := range syms {
		i := int(sym.Section)
		if sym.Size == 0 || i <= 0 || i >= len(ef.Sections) || ef.Sections[i].Type == elf.SHT_NOBITS {
			continue
		}
		total += float64(sym.Size)
		group := "Go runtime tables (go:*)"
		if !strings.HasPrefix(sym.Name, "go:") {
			group = groupOf(symbolPackage(sym.Name), modules)
		}
		sums[group] += float64(sym.Size)
	}
	var list []pkgCost
	for k, v := range sums {
		list = append(list, pkgCost{k, v})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
	return list, total, nil
}

// sectionSizes are the sizes of the loadable sections that matter.
func sectionSizes(bin string) (map[string]uint64, error) {
	ef, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	out := map[string]uint64{}
	for _, s := range ef.Sections {
		switch s.Name {
		case ".text", ".rodata", ".gopclntab", ".noptrdata", ".data":
			out[s.Name] = s.Size
		}
	}
	return out, nil
}

// symbolPackage is the import path a symbol belongs to, e.g.
// "github.com/spf13/viper.(*Viper).find" → "github.com/spf13/viper".
func symbolPackage(sym string) string {
	// Generated equality and hash functions: type:.eq.<type>.
	for _, p := range []string{"type:", ".eq.", ".hash.", "*"} {
		sym = strings.TrimPrefix(sym, p)
	}
	if i := strings.IndexAny(sym, "[(,{ "); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/')
	if dot := strings.IndexByte(sym[slash+1:], '.'); dot >= 0 {
		return sym[:slash+1+dot]
	}
	return sym
}

// groupOf maps a package to its module, or "std: <top-level dir>".
func groupOf(pkg string, modules []string) string {
	for _, m := range modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	first, _, _ := strings.Cut(pkg, "/")
	if first == "vendor" {
		return "std: vendor (x/net, x/crypto)"
	}
	if !strings.Contains(first, ".") {
		return "std: " + first
	}
	return pkg
}

// analysis is the "where the time and memory go" part of the report.
type analysis struct {
	lean, heavy           binaryFacts
	leanInit, heavyInit   initTrace
	bySize                []pkgCost
	symTotal              float64
	sections              map[string]uint64
	unstrippedSize        int64
	heavyStartup          *startupResult
	leanErr, heavyErr     error
	standinVersionMedian  float64
	standinVersionSamples int
	wrapperMs             float64 // exec of the wrapper → its launch stamp
}

// wrapperOverhead is how long the wrapper takes from exec to its launch
// stamp (sh, then date): part of every "Envoy launched" figure, as it was
// of the incumbent's.
func wrapperOverhead(wrapper, stamp string, runs int) float64 {
	var xs []float64
	for i := 0; i < runs; i++ {
		_ = os.Remove(stamp)
		cmd := exec.Command(wrapper, "--config-path", "/nonexistent")
		cmd.Env = append(agentEnv(), "ZPBENCH_STAMP="+stamp, "ZPBENCH_DRY=1")
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			continue
		}
		if t, err := readStamp(stamp); err == nil {
			xs = append(xs, ms(t.Sub(t0)))
		}
	}
	return summarize(xs).Median
}

func (b *bed) analyze(lean binaryFacts) analysis {
	an := analysis{lean: lean}
	progress("analysis: init trace, symbol sizes")
	an.leanInit, an.leanErr = traceInit(b.zoneproxy, 10)
	unstripped := filepath.Join(b.dir, "zoneproxy-unstripped")
	if err := goBuild(b.root, buildTags(b.zoneproxy), unstripped, "./cmd/zoneproxy"); err != nil {
		an.leanErr = err
	} else {
		if st, err := os.Stat(unstripped); err == nil {
			an.unstrippedSize = st.Size()
		}
		mods := append([]string{"github.com/zoneproxy/zoneproxy"}, lean.deps...)
		an.bySize, an.symTotal, an.leanErr = sizeByModule(unstripped, mods)
		if an.leanErr == nil {
			an.sections, an.leanErr = sectionSizes(b.zoneproxy)
		}
	}
	// The stand-in's own `--version`, which the wrapper answers instead.
	var vs []float64
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		if exec.Command(b.standin, "--version").Run() == nil {
			vs = append(vs, ms(time.Since(t0)))
		}
	}
	an.standinVersionMedian, an.standinVersionSamples = summarize(vs).Median, len(vs)
	an.wrapperMs = wrapperOverhead(b.wrapper, filepath.Join(b.dir, "dry-stamp"), 10)

	if b.s.heavyRuns == 0 {
		return an
	}
	progress("analysis: building zoneproxy with the Envoy protos and gRPC linked in")
	src := filepath.Join(b.dir, "heavy.go")
	overlay := filepath.Join(b.dir, "overlay.json")
	target := filepath.Join(b.root, "cmd", "zoneproxy", "zz_bench_heavy.go")
	ov := fmt.Sprintf(`{"Replace":{%q:%q}}`, target, src)
	if err := os.WriteFile(src, []byte(heavyOverlay), 0o644); err != nil {
		an.heavyErr = err
		return an
	}
	if err := os.WriteFile(overlay, []byte(ov), 0o644); err != nil {
		an.heavyErr = err
		return an
	}
	heavyBin := filepath.Join(b.dir, "zoneproxy-heavy")
	if err := goBuild(b.root, append(buildTags(b.zoneproxy), "-overlay", overlay, "-ldflags", "-s -w"), heavyBin, "./cmd/zoneproxy"); err != nil {
		an.heavyErr = err
		return an
	}
	if an.heavy, an.heavyErr = inspectBinary(heavyBin); an.heavyErr != nil {
		return an
	}
	if an.heavyInit, an.heavyErr = traceInit(heavyBin, 10); an.heavyErr != nil {
		return an
	}
	progress("analysis: %d start-up runs of the heavy build", b.s.heavyRuns)
	res, err := b.startupFigure(heavyBin, 0, b.s.heavyRuns, 0, false)
	an.heavyStartup, an.heavyErr = &res, err
	return an
}
