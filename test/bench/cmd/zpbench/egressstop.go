package main

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// egressStopMesh is the egress-stop figure's own mesh: the restart and
// hung figures leave killed egresses of mesh payments in kuma-cp's store
// (and so in the set handed out) until their deregistration delay ends,
// and a sidecar sent there would be refused by no fault of the stop.
const egressStopMesh = "bench-egress-stop"

// egressStopResult is one zone egress stopping (SIGTERM) while another
// serves on and sidecars keep opening connections to the set handed out.
type egressStopResult struct {
	rate       int
	conns      []connOutcome
	noEgress   int
	sig        time.Time
	stop       time.Duration // SIGTERM → the stopping egress's exit
	code       int
	withdrew   bool
	leftStore  time.Duration // SIGTERM → kuma-cp's store no longer hands it out (0: never seen)
	leftCars   time.Duration // SIGTERM → the sidecars no longer get it (store + the propagation lag)
	stopping   string        // its Dataplane name
	lastToStop time.Duration // SIGTERM → the last connection sent to it (negative: none after SIGTERM)
}

// failed are the connections refused or reset (or failing otherwise).
func (r egressStopResult) failed() []connOutcome { return failedConns(r.conns) }

// servedBy counts the connections each egress took.
func (r egressStopResult) servedBy() map[string]int {
	m := map[string]int{}
	for _, c := range r.conns {
		if c.kind == outcomeOK {
			m[c.dataplane]++
		}
	}
	return m
}

// egressStopFigure runs two zone egresses of egressStopMesh, puts a
// sidecar load of b.s.egressRate connections per second on the set
// handed out, SIGTERMs one, waits for its exit, and goes on for 2 s.
func (b *bed) egressStopFigure() (egressStopResult, error) {
	res := egressStopResult{rate: b.s.egressRate, stopping: "bench-egress-a"}
	b.cp.CreateMesh(egressStopMesh)
	var agents []*agent
	defer func() {
		for _, a := range agents {
			a.kill()
		}
	}()
	for _, name := range []string{"bench-egress-a", "bench-egress-b"} {
		p, err := b.newEgress(egressStopMesh, name)
		if err != nil {
			return res, err
		}
		a, err := b.startWarm(p)
		if err != nil {
			return res, err
		}
		agents = append(agents, a)
	}
	load, err := b.sidecarsOn(egressStopMesh, 2, res.rate)
	if err != nil {
		return res, err
	}
	defer load.finish()

	a := agents[0]
	res.sig = time.Now()
	a.signal(syscall.SIGTERM)
	code, err := a.wait(40 * time.Second)
	if err != nil {
		return res, err
	}
	res.code, res.stop = code, a.exitedAt.Sub(res.sig)
	res.withdrew = strings.Contains(strings.Join(a.output(), "\n"), logWithdrawn)
	time.Sleep(2 * time.Second)
	var none []time.Time
	res.conns, none = load.finish()
	res.noEgress = len(none)

	for _, ch := range b.cp.ZoneEgressTimeline(egressStopMesh) {
		if ch.At.Before(res.sig) || handsOut(ch.Egresses, res.stopping) || res.leftStore != 0 {
			continue
		}
		res.leftStore, res.leftCars = ch.At.Sub(res.sig), ch.EffectiveAt.Sub(res.sig)
	}
	res.lastToStop = -1
	for _, c := range res.conns {
		if c.dataplane == res.stopping && !c.at.Before(res.sig) {
			res.lastToStop = max(res.lastToStop, c.at.Sub(res.sig))
		}
	}
	if code != 0 {
		return res, fmt.Errorf("the stopping egress exited %d:\n%s", code, a.tail(15))
	}
	return res, nil
}

// handsOut says whether the set has an egress of Dataplane name.
func handsOut(set []controlplane.ZoneEgress, name string) bool {
	for _, e := range set {
		if e.Dataplane == name {
			return true
		}
	}
	return false
}
