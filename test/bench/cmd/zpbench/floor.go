package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// floor runs test/bench/cmd/zpfloor, the least a start can do (dial, POST
// /bootstrap, write, exec), between the agent's warm starts: the figure
// and its floor are then taken in the same moments of a machine whose
// speed drifts. Reported beside the figure, never judged.
type floor struct {
	bin, request string
	launches     []time.Duration // zpfloor's exec → Envoy's exec
	gaps         []time.Duration // each agent start minus the floor run after it
	err          error           // why the floor was not measured, or stopped
}

// newFloor builds zpfloor and gives it the control plane's last bootstrap
// request, which is an agent's.
func (b *bed) newFloor() *floor {
	f := &floor{bin: filepath.Join(b.dir, "zpfloor"), request: filepath.Join(b.dir, "floor-request.json")}
	recs := b.cp.BootstrapRequests()
	if len(recs) == 0 {
		f.err = errors.New("no bootstrap request to replay")
		return f
	}
	if f.err = os.WriteFile(f.request, recs[len(recs)-1].Body, 0o600); f.err != nil {
		return f
	}
	f.err = goBuild(b.root, []string{"-ldflags", "-s -w"}, f.bin, "./test/bench/cmd/zpfloor")
	return f
}

// after measures one floor run and pairs it with the agent's start r.
func (f *floor) after(b *bed, r startupRun) {
	if f == nil || f.err != nil {
		return
	}
	var d time.Duration
	if d, f.err = b.floorRun(f.bin, f.request); f.err == nil {
		f.launches = append(f.launches, d)
		f.gaps = append(f.gaps, r.launch-d)
		progress("  floor after it: launch %.1f ms", ms(d))
	}
}

func (b *bed) floorRun(bin, request string) (time.Duration, error) {
	b.seq++
	id := fmt.Sprintf("floor%03d", b.seq)
	workDir, stamp := filepath.Join(b.runDir, "wd"+id), filepath.Join(b.dir, "stamp"+id)
	defer os.RemoveAll(workDir)
	args := []string{"-cp-address", b.cp.URL(), "-ca-cert-file", b.cp.CACertFile(), "-request-file", request,
		"-envoy-binary", b.wrapper, "-work-dir", workDir}
	a, err := startAgent(bin, args, stamp, workDir, "ZPBENCH_DRY=1") // the wrapper stamps, then exits
	if err != nil {
		return 0, err
	}
	defer a.kill()
	if code, err := a.wait(10 * time.Second); err != nil || code != 0 {
		return 0, fmt.Errorf("zpfloor exited %d (%v):\n%s", code, err, a.tail(5))
	}
	if b.execs == nil {
		at, err := a.launchedAt(time.Second)
		return at.Sub(a.execAt), err
	}
	d, _, err := b.kernelLaunch(a)
	return d, err
}

// note is the floor's part of the figure's note.
func (f *floor) note() string {
	switch {
	case f == nil:
		return ""
	case len(f.launches) == 0:
		return fmt.Sprintf("; the floor (zpfloor) not measured: %v", f.err)
	}
	s := fmt.Sprintf("; the floor (zpfloor: dial, POST, write, exec; no configuration, no checks), run after each start: %.1f ms median of %d, "+
		"the agent %.1f ms above it (median of the run-by-run differences; not judged)",
		summarize(durationsMs(f.launches)).Median, len(f.launches), summarize(durationsMs(f.gaps)).Median)
	if f.err != nil {
		s += fmt.Sprintf(", then stopped: %v", f.err)
	}
	return s
}

func durationsMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}
