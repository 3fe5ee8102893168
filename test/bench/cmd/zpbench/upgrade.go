package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/host/reuseport"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// upgradeMesh is the upgrade figure's own mesh, for egress-stop's reason:
// the restart and hung figures leave killed egresses of mesh payments in
// kuma-cp's egress set, which the sidecars would be sent to.
const upgradeMesh = "bench-upgrade"

// upgradeResult is the upgrade figure: reloads of a zone egress's agent in
// a row, then Envoy handovers in a row, under sidecar load throughout.
type upgradeResult struct {
	rate      int
	reloads   []reloadRun
	handovers []handoverRun
	// The load's connections: from its start to the first handover's
	// request, and from there to 1 s after the last old Envoy's exit.
	reloadLoad, handoverLoad loadWindow
	reloadsFrom              time.Time
	envoyPID                 int  // Envoy's pid before the first reload
	envoyLaunches            int  // Envoys the wrapper saw launched by the end of the reloads
	envoyRanOn               bool // that Envoy still ran then
	migrates                 bool // net.ipv4.tcp_migrate_req is 1: queued clients move to the new Envoy
}

// reloadRun is one `zoneproxy reload`.
type reloadRun struct {
	serving   time.Duration // the command's start → /status shows the next generation and /ready is 200
	command   time.Duration // the command's start → its exit
	envoyPID  int           // the Envoy /status names then
	readyBody string
}

// handoverRun is one POST /envoy/handover.
type handoverRun struct {
	refused        int           // 409s before one was taken (kuma-cp's stream not connected yet)
	waited         time.Duration // the first POST → the one taken
	took           time.Duration // the POST taken → 200
	oldExit        time.Duration // 200 → the old Envoy gone
	oldPID, newPID int
}

// loadWindow is what the sidecar load met in one phase.
type loadWindow struct {
	conns    []connOutcome
	noEgress []time.Time // ticks with no egress handed out
	from, to time.Time
}

func loadWindowOf(conns []connOutcome, none []time.Time, from, to time.Time) loadWindow {
	w := loadWindow{from: from, to: to}
	for _, c := range conns {
		if !c.at.Before(from) && c.at.Before(to) {
			w.conns = append(w.conns, c)
		}
	}
	for _, t := range none {
		if !t.Before(from) && t.Before(to) {
			w.noEgress = append(w.noEgress, t)
		}
	}
	return w
}

// upgradeFigure warms a zone egress that drains an old Envoy in at most
// 1 s, puts b.s.egressRate sidecar connections a second on it, then runs
// b.s.upgradeReloads reloads and b.s.upgradeHandovers Envoy handovers.
func (b *bed) upgradeFigure() (upgradeResult, error) {
	res := upgradeResult{rate: b.s.egressRate, migrates: reuseport.Check().Migrates}
	b.cp.CreateMesh(upgradeMesh)
	p, err := b.newEgress(upgradeMesh, "bench-upgrade")
	if err != nil {
		return res, err
	}
	// --drain-min 0s: an old Envoy may go once it has had no connection
	// for a second, which with --drain-time 1s is its drain time anyway.
	p.args = append(p.args, "--drain-min", "0s")
	a, err := b.startWarm(p)
	if err != nil {
		return res, err
	}
	defer a.kill()
	var st agentGenerations
	if err := getStatus(p.readiness, &st); err != nil || st.Envoy == nil {
		return res, fmt.Errorf("/status names no Envoy (%v)", err)
	}
	res.envoyPID = st.Envoy.PID
	load, err := b.sidecarsOn(upgradeMesh, 1, res.rate)
	if err != nil {
		return res, err
	}
	defer load.finish()
	res.reloadsFrom = time.Now()

	for i := 0; i < b.s.upgradeReloads; i++ {
		r, err := b.reloadOnce(a, p, st.Generation+i+1)
		if err != nil {
			return res, fmt.Errorf("reload %d: %w", i+1, err)
		}
		res.reloads = append(res.reloads, r)
		progress("  reload %d: → serving %.0f ms (the command %.0f ms), Envoy pid %d", i+1, ms(r.serving), ms(r.command), r.envoyPID)
	}
	res.envoyLaunches, res.envoyRanOn = len(envoyLaunches(p.stamp)), !harness.ProcessGone(res.envoyPID)
	handoversFrom := time.Now()
	for i := 0; i < b.s.upgradeHandovers; i++ {
		h, err := handOver(a, p.readiness)
		if err != nil {
			return res, fmt.Errorf("handover %d: %w", i+1, err)
		}
		res.handovers = append(res.handovers, h)
		progress("  handover %d: %.0f ms, old Envoy gone %.0f ms later (refused %d times for %.1f s before)", i+1, ms(h.took), ms(h.oldExit), h.refused, h.waited.Seconds())
	}
	time.Sleep(time.Second)
	conns, none := load.finish()
	end := time.Now()
	res.reloadLoad = loadWindowOf(conns, none, load.started, handoversFrom)
	res.handoverLoad = loadWindowOf(conns, none, handoversFrom, end)
	return res, nil
}

// envoyKept: every reload left the first Envoy serving, none was launched.
func (r upgradeResult) envoyKept() bool {
	for _, rl := range r.reloads {
		if rl.envoyPID != r.envoyPID {
			return false
		}
	}
	return r.envoyRanOn && r.envoyLaunches == 1
}

// reloadOnce runs `zoneproxy reload` and polls /status and /ready every
// 2 ms until the agent's generation gen serves.
func (b *bed) reloadOnce(a *agent, p proxy, gen int) (reloadRun, error) {
	var r reloadRun
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.zoneproxy, "reload", "--work-dir", p.workDir, "--readiness-port", strconv.Itoa(p.readiness))
	cmd.Env = agentEnv()
	type outcome struct {
		out []byte
		err error
		at  time.Time
	}
	exited := make(chan outcome, 1)
	start := time.Now()
	go func() {
		out, err := cmd.CombinedOutput()
		exited <- outcome{out, err, time.Now()}
	}()
	var st agentGenerations
	var code int
	served := waitUntil(20*time.Second, 2*time.Millisecond, func() bool {
		st = agentGenerations{}
		if getStatus(p.readiness, &st) != nil || st.Generation != gen || st.Envoy == nil {
			return a.exited()
		}
		code, r.readyBody = readyFull(p.readiness)
		return code == http.StatusOK || a.exited()
	})
	r.serving = time.Since(start)
	o := <-exited
	r.command = o.at.Sub(start)
	if o.err != nil || !served || code != http.StatusOK {
		return r, fmt.Errorf("generation %d: /ready %d %q, the command: %v\n%s\nthe agent:\n%s", gen, code, r.readyBody, o.err, o.out, a.tail(15))
	}
	r.envoyPID = st.Envoy.PID
	return r, nil
}

// handoverRefused is how a 409 begins when a handover cannot start now
// (upgrade.ErrHandoverRefused); a failed one says "Envoy handover failed".
const handoverRefused = "cannot hand over to a new Envoy now"

// handOver asks for an Envoy handover, again with backoff while it is
// refused (after a reload, until kuma-cp let go of the previous program's
// stream), then waits for the old Envoy's exit.
func handOver(a *agent, port int) (handoverRun, error) {
	var h handoverRun
	var st agentGenerations
	if err := getStatus(port, &st); err != nil || st.Envoy == nil {
		return h, fmt.Errorf("/status names no Envoy (%v)", err)
	}
	h.oldPID = st.Envoy.PID
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/envoy/handover"
	first, pause := time.Now(), 100*time.Millisecond
	for {
		asked := time.Now()
		code, body, err := post(url)
		if code == http.StatusOK {
			h.took, h.waited = time.Since(asked), asked.Sub(first)
			break
		}
		if err != nil || code != http.StatusConflict || !strings.Contains(body, handoverRefused) || time.Since(first) > 30*time.Second {
			return h, fmt.Errorf("POST /envoy/handover: %d %q (%v) after %d refusals:\n%s", code, body, err, h.refused, a.tail(15))
		}
		h.refused++
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
	if err := getStatus(port, &st); err != nil || st.Envoy == nil || st.Envoy.PID == h.oldPID {
		return h, fmt.Errorf("after the handover /status names Envoy %+v (%v), the old one was pid %d", st.Envoy, err, h.oldPID)
	}
	h.newPID = st.Envoy.PID
	handed := time.Now()
	if !waitUntil(10*time.Second, 2*time.Millisecond, func() bool { return harness.ProcessGone(h.oldPID) }) {
		return h, fmt.Errorf("the old Envoy (pid %d) still runs 10 s after the handover:\n%s", h.oldPID, a.tail(15))
	}
	h.oldExit = time.Since(handed)
	return h, nil
}

// post is an empty POST to url: the code and the body.
func post(url string) (int, string, error) {
	// A handover answers once the new Envoy serves: longer than a GET.
	c := http.Client{Timeout: 90 * time.Second}
	resp, err := c.Post(url, "", nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
