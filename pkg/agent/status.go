package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// Status is what GET /status answers: the agent's phase, and what the
// control plane is expected to make of this proxy right now.
type Status struct {
	Phase        string             `json:"phase"`
	Detail       string             `json:"detail"`
	Since        time.Time          `json:"since"`
	ControlPlane ControlPlaneStatus `json:"controlPlane"`
	Cache        *xds.CacheState    `json:"cache,omitempty"`
	// Envoy is the Envoy the agent supervises; nil before the first starts.
	Envoy *EnvoyStatus `json:"envoy,omitempty"`
	// Drain is "" in rotation, "maintenance" while `zoneproxy drain` or
	// SIGUSR2 holds the proxy out of it.
	Drain string `json:"drain,omitempty"`
	// Stop is "restart" or "stop" while the agent stops (restart.go).
	Stop string `json:"stop,omitempty"`
	// Generation is the agent's program: 1 at start, one more at each
	// reload; EnvoyGeneration counts the Envoys started in place.
	Generation      int `json:"generation"`
	EnvoyGeneration int `json:"envoyGeneration"`
	// Reload is the last reload, nil if none.
	Reload *upgrade.ReloadStatus `json:"reload,omitempty"`
	// ProtocolChange is the last handover to another ADS protocol after
	// the control plane's bootstrap changed it (follow.go); nil if none.
	ProtocolChange *inplace.ProtocolChangeStatus `json:"protocolChange,omitempty"`
}

// EnvoyStatus is the supervised Envoy: its PID (0 once it has exited) and
// the build it reported.
type EnvoyStatus struct {
	PID   int    `json:"pid"`
	Build string `json:"build,omitempty"`
	// Generation counts the Envoys this agent ran in turn: 1, then one
	// more with each handover (pkg/upgrade/inplace).
	Generation int64 `json:"generation,omitempty"`
}

// ControlPlaneStatus is the control plane's view of the proxy, as its
// streams told the relay. State is "" in direct mode or before the first
// stream.
type ControlPlaneStatus struct {
	State xds.UpstreamState `json:"state"`
	Since time.Time         `json:"since,omitzero"`
	Says  string            `json:"says"`
}

// Status is the agent's status now.
func (a *Agent) Status() Status {
	snap := a.tracker.Current()
	v := snap.Verdict() // /ready's word and reason: ENVOY_UNREACHABLE while a hung Envoy is READY
	st := Status{Phase: v.Word, Detail: v.Detail, Since: snap.Since}
	x := a.xds.get()
	var s xds.StreamState
	if x != nil {
		s = x.Stream()
	}
	u := s.Upstream
	st.ControlPlane = ControlPlaneStatus{State: u.State, Since: u.Since, Says: xds.ControlPlaneWords(u.State, x != nil || a.cfg.XDSRelay, s.Refusal)}
	if e := a.sup.Now(); e != nil {
		st.Envoy = &EnvoyStatus{Build: e.Build, Generation: e.Generation}
		if !e.Proc.Exited() {
			st.Envoy.PID = e.Proc.PID()
		}
	}
	if a.maint.want.Load() {
		st.Drain = "maintenance"
	}
	st.Stop = a.stopAs.status(a.tracker.Current().Phase)
	st.Generation, st.EnvoyGeneration, st.Reload = a.up.Record().Generations()
	a.follow.status(&st)
	if x != nil {
		if _, c := x.Live(); c.InUse {
			st.Cache = &c
		}
	}
	return st.outbound()
}

// outbound is st with the text it quotes from elsewhere (a control
// plane's message, Envoy's build, an error) escaped: `zoneproxy status`
// prints it on an operator's terminal.
func (st Status) outbound() Status {
	st.Phase = errtext.Outbound(st.Phase)
	st.Detail = errtext.Outbound(st.Detail)
	st.ControlPlane.Says = errtext.Outbound(st.ControlPlane.Says)
	if st.Envoy != nil {
		e := *st.Envoy
		e.Build = errtext.Outbound(e.Build)
		st.Envoy = &e
	}
	if st.Reload != nil {
		r := *st.Reload
		r.Error = errtext.Outbound(r.Error)
		st.Reload = &r
	}
	if st.ProtocolChange != nil {
		p := *st.ProtocolChange
		p.Says = errtext.Outbound(p.Says)
		st.ProtocolChange = &p
	}
	return st
}

// statusHandler serves Status as JSON.
func (a *Agent) statusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.Status())
	})
}
