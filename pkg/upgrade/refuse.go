package upgrade

import (
	"errors"
	"fmt"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// Reload results, the label of zoneproxy_reloads_total.
const (
	ResultOK      = "ok"      // the new program serves
	ResultRefused = "refused" // not now, or the new binary or configuration cannot take over
	ResultFailed  = "failed"  // the replacement itself failed; this program serves on
)

// ReloadStatus is the last reload: the one that started this program, or
// one it refused or failed.
type ReloadStatus struct {
	Result string    `json:"result"`
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
}

// ErrReloadRefused wraps every reason a reload is not done.
var ErrReloadRefused = errors.New("reload refused")

// ErrHandoverRefused wraps why an Envoy handover cannot start now.
var ErrHandoverRefused = errors.New("cannot hand over to a new Envoy now")

// CannotReload is a refusal no later reload lifts: this agent cannot hand
// over to the new program at all, and only a restart brings it in (exit
// 69 of `zoneproxy reload`; any other refusal is 75, try again).
type CannotReload struct{ Err error }

func (e CannotReload) Error() string { return e.Err.Error() }
func (e CannotReload) Unwrap() error { return e.Err }

// CannotReload tells POST /reload to answer so (localserver.HandleReload).
func (CannotReload) CannotReload() bool { return true }

// StartUnderWay is a refusal that a short wait may lift.
type StartUnderWay struct{ Err error }

func (e StartUnderWay) Error() string { return e.Err.Error() }
func (e StartUnderWay) Unwrap() error { return e.Err }

// Refused is ErrReloadRefused for why.
func Refused(why string) error { return fmt.Errorf("%w: %s", ErrReloadRefused, why) }

// Conditions are what decides whether a reload may happen now.
type Conditions struct {
	Phase state.Phase
	// Started: the work dir and the agent's listeners are open.
	Started bool
	// StopAsked: a stop signal came, the phase may not say so yet.
	StopAsked bool
	// DrainAsked: a maintenance drain is asked for.
	DrainAsked bool
	// EnvoyStarted: an Envoy was started (or adopted); EnvoyExited: it
	// has exited since; Serving: a live Envoy is supervised.
	EnvoyStarted, EnvoyExited, Serving bool
	// RetiringPID is the old Envoy of a handover still draining, 0 for none.
	RetiringPID int
	// Adoptable: the running Envoy is a process the next program can adopt.
	Adoptable bool
}

// Reloadable says whether a reload may happen now, and with Envoy or
// before it starts (the new program then starts over).
func Reloadable(c Conditions) (withEnvoy bool, err error) {
	refuse := func(why string) (bool, error) { return false, Refused(why) }
	starting := func(why string) (bool, error) { return false, StartUnderWay{Refused(why)} }
	switch p := c.Phase; {
	case !c.Started:
		return starting("the agent is still starting; reload once /ready answers")
	case c.StopAsked || p == state.Terminating || p == state.Stopped || p == state.Failed:
		return refuse("the agent is stopping")
	case c.DrainAsked || p == state.Draining || p == state.Drained:
		return refuse("the proxy is drained or draining for maintenance; reload after `zoneproxy undrain`, or restart it")
	case !c.EnvoyStarted && (p == state.Starting || p == state.WaitingForMesh || p == state.WaitingForControlPlane):
		return false, nil
	case !c.EnvoyStarted || c.EnvoyExited || !c.Serving:
		return starting(fmt.Sprintf("Envoy is starting (%s); reload once /ready says READY", p))
	case c.RetiringPID != 0:
		return refuse(fmt.Sprintf("an Envoy handover's old Envoy (pid %d) still drains; reload once it exited", c.RetiringPID))
	case !c.Adoptable:
		return false, CannotReload{Refused("this Envoy cannot be handed over; restart instead")}
	}
	return true, nil
}
