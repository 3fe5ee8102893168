package upgrade

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/reuseport"
)

// An Envoy handover replaces the running Envoy without dropping a
// connection (docs/operator-guide.md, "Envoy upgrades and bootstrap changes
// without a dropped connection"): a new Envoy starts beside the old one
// in the other slot (its own admin socket and bootstrap copy), binds the
// zone listeners through SO_REUSEPORT, and is fed by the relay from what
// the old one holds; once it is LIVE with every zone listener, the relay
// moves the control plane's one stream to it (pkg/xds/relay/handover.go),
// and the old Envoy stops accepting, drains and exits (Retirements). If
// the new Envoy fails, it is ended and the old one serves on. /ready stays
// 200 throughout.

// Process is an Envoy as a handover drives it.
type Process interface {
	PID() int
	// Done is closed once Envoy has exited.
	Done() <-chan struct{}
	Exited() bool
	ExitDescription() string
	// Stop sends SIGTERM, SIGKILL after grace, and returns once it is gone.
	Stop(grace time.Duration) (killed bool)
}

// Admin is what a handover asks of the new Envoy's admin API.
type Admin interface {
	Ready(ctx context.Context) (word string, live bool, err error)
	Listeners(ctx context.Context) ([]envoy.Listener, error)
	Close()
}

// Relay is the xDS relay as a handover moves the control plane's stream.
type Relay interface {
	// Takeable: the control plane's stream is up and serves Envoy, not
	// the cache; state names it.
	Takeable() (state string, ok bool)
	BeginHandover(serving int)
	CompleteHandover(ctx context.Context) error
	EndHandover()
}

// Launch is how this program launches an Envoy: the same for every one,
// but for the files of its slot.
type Launch struct {
	// Write writes a file of the work dir and returns its path.
	Write     func(name string, doc []byte) (string, error)
	Bootstrap []byte
	// A are slot A's files: the bootstrap's own.
	A    Files
	Opts envoy.Options // ConfigPath set per slot
	Spec envoy.Spec    // Path and Args set per Envoy
}

// SpecFor is the launch of an Envoy in slot s from the binary at path,
// its bootstrap written to the slot's file.
func (l *Launch) SpecFor(s Slot, path string) (envoy.Spec, envoy.AdminAddress, error) {
	files, err := s.FilesOf(l.A)
	if err != nil {
		return envoy.Spec{}, envoy.AdminAddress{}, err
	}
	doc, adminAddr := l.Bootstrap, files.Admin
	if s != SlotA {
		if doc, adminAddr, err = envoy.WithAdminPipe(l.Bootstrap, files.Admin.Socket); err != nil {
			return envoy.Spec{}, envoy.AdminAddress{}, err
		}
	}
	cfgPath, err := l.Write(files.Bootstrap, doc)
	if err != nil {
		return envoy.Spec{}, envoy.AdminAddress{}, err
	}
	opts := l.Opts
	opts.ConfigPath = cfgPath
	spec := l.Spec
	spec.Path, spec.Args = path, envoy.Args(opts)
	return spec, adminAddr, nil
}

// WithBootstrap is l with another bootstrap.
func (l *Launch) WithBootstrap(doc []byte) *Launch {
	next := *l
	next.Bootstrap = doc
	return &next
}

// Place is an Envoy's place in the handovers: its generation (1 for the
// first, one more with each handover) and the slot it runs in.
type Place struct {
	Generation int64
	Slot       Slot
}

// Next is the place of the Envoy that takes over from the one at p.
func (p Place) Next() Place { return Place{Generation: p.Generation + 1, Slot: p.Slot.Next()} }

// Swap starts new Envoys beside the serving one and hands over to them.
// P and A are the caller's types of Envoy and of its admin API.
type Swap[P Process, A Admin] struct {
	Log *zap.Logger
	// Find is the binary --envoy-binary names now, and its version.
	Find  func(ctx context.Context) (string, envoy.Version, error)
	Start func(envoy.Spec) (P, error)
	Admin func(envoy.AdminAddress) A
	// Want are the zone listeners the new Envoy must have.
	Want []string
	// LiveTimeout bounds the new Envoy's way to LIVE with Want;
	// SwitchTimeout the wait for a quiet moment on the control plane's
	// stream; Grace is between SIGTERM and SIGKILL of a failed new Envoy.
	LiveTimeout, SwitchTimeout, Grace time.Duration
	// Retiring are the old Envoys of earlier handovers.
	Retiring *Retirements
}

// Taking is an Envoy of a handover.
type Taking[P Process, A Admin] struct {
	Proc    P
	Admin   A
	Path    string
	Version envoy.Version
	Place   Place
}

// Run starts a new Envoy beside the serving one (its pid, at from) and
// hands the control plane's stream over to it; commit runs once it has
// the stream, and its error fails the handover too. On failure the new
// Envoy is ended and the old one serves on.
func (s Swap[P, A]) Run(ctx context.Context, l *Launch, relay Relay, serving int, from Place, commit func() error) (*Taking[P, A], error) {
	if relay == nil {
		return nil, fmt.Errorf("%w: it needs the xDS relay (%s), which feeds the new Envoy while kuma-cp keeps one stream", ErrHandoverRefused, config.KeyXDSRelay.Flag())
	}
	if pid := s.Retiring.Draining(); pid != 0 {
		return nil, fmt.Errorf("%w: the previous handover's old Envoy (pid %d) still drains; try again once it exited", ErrHandoverRefused, pid)
	}
	if state, ok := relay.Takeable(); !ok {
		return nil, fmt.Errorf("%w: the control plane's stream is %q, not connected; the new Envoy could not take it over", ErrHandoverRefused, state)
	}
	s.Log.Info("Envoy handover: starting a new Envoy beside the running one")
	if v := reuseport.Check(); v.Warning != "" {
		s.Log.Warn("Envoy handover: " + v.Warning)
	}
	next, err := s.startNext(ctx, l, relay, serving, from.Next())
	if err == nil {
		err = s.awaitNext(ctx, next.Admin, next.Proc)
	}
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, s.SwitchTimeout)
		err = relay.CompleteHandover(sctx)
		cancel()
		if err != nil {
			err = fmt.Errorf("the control plane's stream could not be moved to it: %w", err)
		}
	}
	relay.EndHandover()
	if err == nil && commit != nil {
		err = commit()
	}
	if err != nil {
		if next != nil && next.started {
			next.Proc.Stop(s.Grace)
		}
		if next != nil && next.adminOpen {
			next.Admin.Close()
		}
		return nil, err
	}
	return &next.Taking, nil
}

type starting[P Process, A Admin] struct {
	Taking[P, A]
	started, adminOpen bool
}

// startNext starts the Envoy at p from --envoy-binary as it is now, on its
// slot's files; serving is the old Envoy's pid.
func (s Swap[P, A]) startNext(ctx context.Context, l *Launch, relay Relay, serving int, p Place) (*starting[P, A], error) {
	path, version, err := s.Find(ctx)
	if err != nil {
		return nil, err
	}
	next := &starting[P, A]{Taking: Taking[P, A]{Path: path, Version: version, Place: p}}
	spec, adminAddr, err := l.SpecFor(p.Slot, path)
	if err != nil {
		return next, err
	}
	next.Admin, next.adminOpen = s.Admin(adminAddr), true
	relay.BeginHandover(serving)
	if next.Proc, err = s.Start(spec); err != nil {
		return next, err
	}
	next.started = true
	s.Log.Info("started Envoy", zap.Int("pid", next.Proc.PID()), zap.Int64("generation", p.Generation), zap.Strings("args", spec.Args), zap.String("admin", adminAddr.String()))
	return next, nil
}

// awaitNext waits for the new Envoy to be LIVE with every zone listener.
func (s Swap[P, A]) awaitNext(ctx context.Context, admin A, proc P) error {
	ctx, cancel := context.WithTimeout(ctx, s.LiveTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "its admin API does not answer"
	for {
		select {
		case <-proc.Done():
			return fmt.Errorf("the new Envoy exited (%s)", proc.ExitDescription())
		case <-ctx.Done():
			return fmt.Errorf("the new Envoy was not ready within %s: %s", s.LiveTimeout, last)
		case <-tick.C:
		}
		word, live, err := admin.Ready(ctx)
		switch {
		case err != nil:
			continue
		case !live:
			last = "it reports " + word
			continue
		}
		have, err := admin.Listeners(ctx)
		if err != nil {
			continue
		}
		missing := slices.DeleteFunc(slices.Clone(s.Want), func(n string) bool {
			return slices.ContainsFunc(have, func(l envoy.Listener) bool { return l.Name == n })
		})
		if len(missing) == 0 {
			return nil
		}
		last = fmt.Sprintf("it is LIVE without the zone listeners %v (could it not bind them beside the old Envoy? both need enable_reuse_port)", missing)
	}
}
