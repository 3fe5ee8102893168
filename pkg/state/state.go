// Package state holds the agent's lifecycle state: the one source of truth
// that readiness, sd_notify and metrics observe. Only the agent writes its
// phase; the Envoy prober (pkg/localserver) writes what Envoy's admin API
// last answered. Snapshot.Verdict joins the two into what every observer
// says.
package state

import (
	"sync"
	"time"
)

// Phase is where the agent is in its lifecycle.
type Phase string

const (
	Starting Phase = "STARTING"
	// WaitingForControlPlane: the control plane is unreachable or busy.
	WaitingForControlPlane Phase = "WAITING_FOR_CONTROL_PLANE"
	WaitingForMesh         Phase = "WAITING_FOR_MESH"
	Bootstrapped           Phase = "BOOTSTRAPPED"
	EnvoyStarting          Phase = "ENVOY_STARTING"
	Ready                  Phase = "READY"
	// NoZoneListener: Envoy is live but the control plane sent no zone
	// listener yet, so nothing is served.
	NoZoneListener Phase = "NO_ZONE_LISTENER"
	// Draining: `zoneproxy drain` (or SIGUSR2) failed Envoy's health checks
	// and its listeners drain; Envoy and the agent keep running.
	Draining Phase = "DRAINING"
	// Drained: out of rotation, listeners closed, until `zoneproxy undrain`
	// or a stop.
	Drained     Phase = "DRAINED"
	Terminating Phase = "TERMINATING"
	Stopped     Phase = "STOPPED"
	Failed      Phase = "FAILED"
)

// Snapshot is one observation of the agent.
type Snapshot struct {
	Phase Phase
	// Detail is a short human sentence for STATUS= lines and 503 bodies,
	// e.g. `waiting for mesh "payments" (attempt 4, next in 3.2s)`.
	Detail string
	// Since is when Phase was entered.
	Since time.Time
	// DrainDeadline is set while terminating with a drain wait.
	DrainDeadline time.Time
	// Envoy is what Envoy's admin /ready last answered, kept across
	// changes of phase.
	Envoy EnvoyHealth
}

// Tracker publishes snapshots to any number of observers.
type Tracker struct {
	mu      sync.Mutex
	current Snapshot
	subs    []chan Snapshot
	now     func() time.Time
}

// NewTracker starts in STARTING.
func NewTracker() *Tracker {
	t := &Tracker{now: time.Now}
	t.current = Snapshot{Phase: Starting, Detail: "starting", Since: t.now()}
	return t
}

// Current returns the latest snapshot.
func (t *Tracker) Current() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// Set moves to phase p with a detail line and notifies observers.
func (t *Tracker) Set(p Phase, detail string) { t.update(p, detail, time.Time{}) }

// SetDraining enters TERMINATING with a drain deadline.
func (t *Tracker) SetDraining(detail string, deadline time.Time) {
	t.update(Terminating, detail, deadline)
}

// Restate changes the detail of phase p while p is the current phase, in
// one step: a change of phase made meanwhile by another observer (say,
// a zone listener found missing) is never overwritten.
func (t *Tracker) Restate(p Phase, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current.Phase == p && t.current.Detail != detail {
		t.setLocked(p, detail, t.current.DrainDeadline)
	}
}

func (t *Tracker) update(p Phase, detail string, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setLocked(p, detail, deadline)
}

func (t *Tracker) setLocked(p Phase, detail string, deadline time.Time) {
	since := t.current.Since
	if p != t.current.Phase {
		since = t.now()
	}
	t.current = Snapshot{Phase: p, Detail: detail, Since: since, DrainDeadline: deadline, Envoy: t.current.Envoy}
	t.notifyLocked()
}

// SetEnvoy records what Envoy's admin /ready answered. Observers are told
// only when the answer differs from the last in kind (another state word,
// reachable or not, another reason); a repeated answer only refreshes At.
func (t *Tracker) SetEnvoy(h EnvoyHealth) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := !t.current.Envoy.sameAnswer(h)
	t.current.Envoy = h
	if changed {
		t.notifyLocked()
	}
}

func (t *Tracker) notifyLocked() {
	for _, c := range t.subs {
		// Observers only need the latest snapshot: drop a stale one first.
		select {
		case <-c:
		default:
		}
		c <- t.current
	}
}

// Subscribe returns a channel that always holds the latest snapshot not yet
// read. It starts with the current one.
func (t *Tracker) Subscribe() <-chan Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := make(chan Snapshot, 1)
	c <- t.current
	t.subs = append(t.subs, c)
	return c
}
