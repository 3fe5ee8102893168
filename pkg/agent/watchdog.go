package agent

import (
	"context"

	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// envoyHealthy is the watchdog's rule for healthy: before Envoy runs (the
// agent waits for the mesh or the control plane) the agent being alive is
// enough; then Envoy must not have exited, and its admin API must answer.
// And the relay must not keep Envoy's stream withdrawn outside a drain or
// a stop: no configuration could ever reach Envoy then.
func (a *Agent) envoyHealthy(ctx context.Context) bool {
	if a.stuckWithdrawn() {
		return false
	}
	e := a.sup.Now()
	if e == nil {
		return true
	}
	if e.Proc.Exited() {
		return false
	}
	_, _, err := e.Admin.Ready(ctx)
	return err == nil
}

// notifySystemd speaks sd_notify (a no-op outside a Type=notify unit)
// until the agent reaches STOPPED or FAILED. The returned channel is
// closed once the last STATUS= line is sent.
func (a *Agent) notifySystemd() <-chan struct{} {
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		_ = sdnotify.Run(context.Background(), a.tracker, sdnotify.Options{
			Healthy: a.envoyHealthy, StopGrace: AfterDrain, Log: a.log, Generations: a.up.Record().Words,
		})
	}()
	return notified
}

// stuckWithdrawn: the relay parks Envoy's streams for a withdrawal while
// the agent neither drains nor stops, a state nothing ends but a restart.
func (a *Agent) stuckWithdrawn() bool {
	x := a.xds.get()
	if x == nil {
		return false
	}
	return withdrawnOutsideADrain(x.Withdrawn(), a.tracker.Current().Phase)
}

// withdrawnOutsideADrain is the rule: waiting for the mesh or for an
// unreachable control plane is not it, nor a maintenance drain, which a
// restart would end.
func withdrawnOutsideADrain(withdrawn bool, phase state.Phase) bool {
	switch phase {
	case state.Draining, state.Drained, state.Terminating, state.Stopped, state.Failed:
		return false
	}
	return withdrawn
}
