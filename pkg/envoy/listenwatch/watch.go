package listenwatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// CheckEvery paces the check that Envoy really has its zone listeners:
// Envoy goes LIVE without them when the control plane has nothing for
// this proxy to serve yet.
const CheckEvery = time.Second

// adminBudget bounds one question to Envoy's admin API.
const adminBudget = 2 * time.Second

// Lister is the part of Envoy's admin API the watch asks.
type Lister interface {
	Listeners(ctx context.Context) ([]envoy.Listener, error)
}

// Options wire the watch to the agent that runs it.
type Options struct {
	Config *config.Config
	Log    *zap.Logger
	// Tracker is where READY and NO_ZONE_LISTENER are published.
	Tracker *state.Tracker
	// Metrics counts which zone listeners Envoy has; nil counts nothing.
	Metrics interface {
		ZoneListener(name string, present bool)
	}
	// ReadyWords is what READY says now; nil is "".
	ReadyWords func() string
	// Configured says whether an Envoy started now gets its configuration
	// at once; nil is always. A restart for a freed port waits for it.
	Configured func() bool
	// Present, if set, is told the zone listeners Envoy has, at every
	// check that could ask (a held-back egress registers once its listener
	// is there).
	Present func(names []string)
}

// Watch is what the agent knows of its zone listeners across Envoys: the
// binds Envoy rejected and the pacing of the restarts that retry them.
type Watch struct {
	opts  Options
	binds bindFailures
}

// New returns the watch of one agent.
func New(o Options) *Watch {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Watch{opts: o}
}

func (w *Watch) want() []Zone { return Expected(w.opts.Config) }

func (w *Watch) readyWords() string {
	if w.opts.ReadyWords == nil {
		return ""
	}
	return w.opts.ReadyWords()
}

func (w *Watch) configured() bool { return w.opts.Configured == nil || w.opts.Configured() }

func (w *Watch) zoneListener(name string, present bool) {
	if w.opts.Metrics != nil {
		w.opts.Metrics.ZoneListener(name, present)
	}
}

// Period watches one serving Envoy: READY while every zone listener is in
// it, NO_ZONE_LISTENER (with the reason and the fix) while one is not.
type Period struct {
	w       *Watch
	admin   Lister
	want    []Zone
	missing []string // nil until the first successful check
	checked bool

	envoyPID  int               // whose sockets are ours, for the port-sharing check
	shared    map[string]string // metrics listener address → what was last warned
	lastShare time.Time

	detail string // what NO_ZONE_LISTENER last said
	// A rejected zone listener's port is free: the agent restarts Envoy.
	rebindOnce         sync.Once
	rebind             chan struct{}
	rebindAsked        bool
	pacedLogged        bool
	unconfiguredLogged bool
}

// Serving starts watching the Envoy of pid through its admin API.
func (w *Watch) Serving(admin Lister, envoyPID int) *Period {
	return &Period{w: w, admin: admin, want: w.want(), envoyPID: envoyPID}
}

// Check asks Envoy once and publishes the result when it changed. An
// unanswered question changes nothing.
func (p *Period) Check(ctx context.Context) {
	w := p.w
	ctx, cancel := context.WithTimeout(ctx, adminBudget)
	defer cancel()
	have, err := p.admin.Listeners(ctx)
	if err != nil {
		w.opts.Log.Debug("cannot list Envoy's listeners", zap.Error(err))
		if !p.checked {
			w.opts.Tracker.Set(state.Ready, w.readyWords())
		}
		return
	}
	p.checkSharedMetricsPorts(have)
	var missing []Zone
	var names, present []string
	for _, zl := range p.want {
		in := slices.ContainsFunc(have, func(l envoy.Listener) bool { return l.Name == zl.Name })
		w.zoneListener(zl.Name, in)
		if in {
			present = append(present, zl.Name)
		} else {
			missing = append(missing, zl)
			names = append(names, zl.Name)
		}
	}
	w.binds.settle(present, len(missing) == 0)
	if w.opts.Present != nil {
		w.opts.Present(present)
	}
	p.checkBindFailures(missing)
	var b strings.Builder
	for i, zl := range missing {
		if i > 0 {
			b.WriteString("; ")
		}
		// A listener Envoy could not bind is no matter of the control plane's.
		if why, ok := w.bindDetail(zl); ok {
			b.WriteString(why)
			continue
		}
		fmt.Fprintf(&b, "Envoy has no listener %s (%s): %s", zl.Name, zl.Addr, zl.Why)
	}
	if p.checked && slices.Equal(names, p.missing) && b.String() == p.detail {
		return
	}
	p.checked, p.missing, p.detail = true, names, b.String()
	if len(missing) == 0 {
		w.opts.Tracker.Set(state.Ready, w.readyWords())
		if len(p.want) > 0 {
			w.opts.Log.Info("zone listeners present", zap.Strings("listeners", Names(p.want)))
		}
		return
	}
	w.opts.Tracker.Set(state.NoZoneListener, b.String())
	w.opts.Log.Warn("Envoy is live but serves nothing: "+b.String(), zap.Strings("missing", names))
}

// Run checks until ctx ends.
func (p *Period) Run(ctx context.Context) {
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.Check(ctx)
		}
	}
}

// RebindDue is closed when Envoy should restart to bind a freed port.
func (p *Period) RebindDue() <-chan struct{} {
	p.rebindOnce.Do(func() { p.rebind = make(chan struct{}) })
	return p.rebind
}
