package listenwatch

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// A zone listener whose port another process holds is rejected by Envoy:
// it NACKs the LDS update with, in LdsApiImpl::onConfigUpdate's and
// ListenSocketImpl::bind's words,
//
//	Error adding/updating listener(s) self_zoneegress_dp_ze-port: cannot bind '0.0.0.0:10002': Address already in use
//
// and runs on without that listener. It tries a rejected listener again
// only when the control plane sends it again, and kuma-cp does not: its
// delta xDS server counts what it sent as delivered, whether Envoy ACKed
// it or not, and sends a resource again only when it changes. So the
// watch says why the listener is missing and who holds its port, watches
// the port, and asks for a restart of Envoy in place (as an undrain does)
// once the port is free: a new Envoy asks for every listener afresh and
// binds it.

// ListenerTypeURL is the LDS resource type.
const ListenerTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

// Pacing of the restarts that retry a freed port: the first at once, then
// no sooner than rebindBackoff, doubling up to rebindBackoffMax, while the
// same listener keeps failing (another process grabbing the port each time
// it is free). Once every zone listener is in Envoy the count starts over.
const (
	rebindBackoff    = 5 * time.Second
	rebindBackoffMax = 5 * time.Minute
	// holdersEvery paces the scan of /proc for whoever holds a port.
	holdersEvery = 10 * time.Second
)

// bindFailure is one zone listener Envoy could not bind.
type bindFailure struct {
	listener string
	port     uint32
	// addr is what Envoy tried to bind, from its NACK (invalid if the
	// NACK did not say; the zone listener's own address is probed then).
	addr   netip.AddrPort
	shown  string // addr as Envoy wrote it
	reason string // Envoy's words: "Address already in use"

	holders   string // who holds the port, as the detail says it
	holdersAt time.Time
}

// retryable: the agent can see when the cause is gone (the port freed,
// the address up) and tries again then.
func (f *bindFailure) retryable() bool { return f.inUse() || f.noAddress() }

// Envoy writes strerror's words, Go the same in lower case.
func (f *bindFailure) inUse() bool { return strings.EqualFold(f.reason, syscall.EADDRINUSE.Error()) }
func (f *bindFailure) noAddress() bool {
	return strings.EqualFold(f.reason, syscall.EADDRNOTAVAIL.Error())
}

// bindFailures is what the watch knows of rejected zone listeners, fed by
// Envoy's NACKs, and the pacing of the restarts that retry them.
type bindFailures struct {
	mu       sync.Mutex
	failed   map[string]*bindFailure // by listener name
	restarts int                     // restarts for a freed port since the zone listeners were last all in Envoy
	last     time.Time               // the last of them
	retry    string                  // what the pending restart is for, for its log and detail
}

// Rejected takes a NACK Envoy sent (the relay's Events.Rejected): one of a
// zone listener that could not bind is remembered for the check, which
// says so and asks for a restart once the port is free. It runs on the
// relay's goroutine, so it only parses and records.
func (w *Watch) Rejected(typeURL, message string, fromCache bool) {
	if typeURL != ListenerTypeURL {
		return
	}
	want := w.want()
	for _, e := range parseBindErrors(message) {
		zl, ok := e.zoneListener(want)
		if !ok {
			continue
		}
		f := &bindFailure{listener: zl.Name, port: zl.Port, addr: e.addr, shown: e.shown, reason: e.reason}
		w.binds.record(f)
		w.opts.Log.Warn("Envoy could not bind a zone listener and runs without it; it does not try again by itself",
			zap.String("listener", zl.Name), zap.String("address", e.shown), zap.String("error", e.reason),
			zap.Bool("retried once free", f.retryable()), zap.Bool("cached configuration", fromCache))
	}
}

// RestartReason is what the restart asked for is for: "listener … on port …".
func (w *Watch) RestartReason() string {
	b := &w.binds
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retry
}

// Restarted says Envoy was replaced at now: the old one's failures are
// forgotten and the restart counts for the pacing.
func (w *Watch) Restarted(now time.Time) {
	b := &w.binds
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.failed)
	b.restarts++
	b.last = now
	b.retry = ""
}

func (b *bindFailures) record(f *bindFailure) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed = map[string]*bindFailure{}
	}
	b.failed[f.listener] = f
}

// failure is the recorded failure of listener, nil if none; a copy.
func (b *bindFailures) failure(listener string) *bindFailure {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.failed[listener]
	if f == nil {
		return nil
	}
	c := *f
	return &c
}

func (b *bindFailures) setHolders(listener, holders string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.failed[listener]; f != nil {
		f.holders, f.holdersAt = holders, at
	}
}

// settle forgets the failures of listeners Envoy has now; with none
// missing, the restarts' pacing starts over.
func (b *bindFailures) settle(present []string, noneMissing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range present {
		delete(b.failed, n)
	}
	if noneMissing {
		b.restarts = 0
	}
}

// mayRestart says whether a restart for a freed port may happen at now,
// and when it may otherwise.
func (b *bindFailures) mayRestart(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.restarts == 0 {
		return true, now
	}
	wait := rebindBackoff << min(b.restarts-1, 16)
	wait = min(wait, rebindBackoffMax)
	next := b.last.Add(wait)
	return !now.Before(next), next
}

func (b *bindFailures) askRestart(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retry = why
}

// envoyBindError is one "cannot bind" in a NACK.
type envoyBindError struct {
	listener string // "" when the NACK does not name it
	addr     netip.AddrPort
	shown    string
	reason   string
}

// parseBindErrors finds Envoy's "cannot bind '<address>': <error>" in an
// LDS NACK, one per failed listener, each on its own line after the
// listener's name ("<name>: cannot bind …").
func parseBindErrors(msg string) []envoyBindError {
	const marker = "cannot bind '"
	var out []envoyBindError
	for line := range strings.SplitSeq(msg, "\n") {
		i := strings.Index(line, marker)
		if i < 0 {
			continue
		}
		rest := line[i+len(marker):]
		shown, reason, ok := strings.Cut(rest, "': ")
		if !ok {
			continue
		}
		e := envoyBindError{shown: shown, reason: strings.TrimSpace(reason)}
		e.addr, _ = netip.ParseAddrPort(shown)
		// "<name>: " just before: LdsApiImpl's prefix for each listener.
		if before, ok := strings.CutSuffix(line[:i], ": "); ok {
			e.listener = before[strings.LastIndexByte(before, ' ')+1:]
		}
		out = append(out, e)
	}
	return out
}

// zoneListener is the zone listener e is about: by name, else by port.
func (e envoyBindError) zoneListener(want []Zone) (Zone, bool) {
	if i := slices.IndexFunc(want, func(zl Zone) bool { return zl.Name == e.listener }); i >= 0 {
		return want[i], true
	}
	if e.addr.IsValid() {
		if i := slices.IndexFunc(want, func(zl Zone) bool { return zl.Port == uint32(e.addr.Port()) }); i >= 0 {
			return want[i], true
		}
	}
	return Zone{}, false
}

// probeAddr is the address to check for f: Envoy's, else the listener's.
func (f *bindFailure) probeAddr(zl Zone) (netip.AddrPort, bool) {
	if f.addr.IsValid() {
		return f.addr, true
	}
	ip, err := netip.ParseAddr(zl.Host)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(zl.Port)), true
}

// checkBindFailures looks at the missing zone listeners Envoy rejected:
// it finds who holds their ports, now and then, and asks for a restart
// once one is free, paced by the restarts before it.
func (p *Period) checkBindFailures(missing []Zone) {
	if p.rebindAsked {
		return
	}
	w := p.w
	b := &w.binds
	now := time.Now()
	for _, zl := range missing {
		f := b.failure(zl.Name)
		if f == nil || !f.retryable() {
			continue
		}
		ap, ok := f.probeAddr(zl)
		if !ok {
			continue
		}
		free, err := bindable(ap)
		if err != nil {
			// The agent cannot bind what Envoy may (a port below 1024
			// without CAP_NET_BIND_SERVICE): a listening socket is what
			// it looks for then.
			hs, herr := portHolders(ap)
			free = herr == nil && len(hs) == 0
		}
		if !free {
			if f.inUse() && now.Sub(f.holdersAt) >= holdersEvery {
				hs, _ := portHolders(ap)
				b.setHolders(zl.Name, holdersText(hs), now)
			}
			continue
		}
		if !w.configured() {
			if !p.unconfiguredLogged {
				p.unconfiguredLogged = true
				w.opts.Log.Warn("the port of a rejected zone listener is free again, but a new Envoy would get no configuration now (the control plane does not answer and no cached configuration is served): restarting it once one of them is there",
					zap.String("listener", zl.Name), zap.Uint32("port", zl.Port))
			}
			continue
		}
		if ok, next := b.mayRestart(now); !ok {
			if !p.pacedLogged {
				p.pacedLogged = true
				w.opts.Log.Warn("the port of a rejected zone listener is free again, but Envoy was restarted for it lately; restarting it again later",
					zap.String("listener", zl.Name), zap.Uint32("port", zl.Port), zap.Time("not before", next))
			}
			continue
		}
		b.askRestart(fmt.Sprintf("listener %s on port %d", zl.Name, zl.Port))
		p.rebindAsked = true
		p.RebindDue() // made, if not yet
		close(p.rebind)
		return
	}
}

// noRetryWords say why the agent, not Envoy, acts.
const noRetryWords = " (Envoy does not retry a listener it rejected, and the control plane does not send it again)"

// bindDetail is what NO_ZONE_LISTENER says of zl when Envoy rejected it
// for its bind; false if it did not.
func (w *Watch) bindDetail(zl Zone) (string, bool) {
	f := w.binds.failure(zl.Name)
	if f == nil {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Envoy could not bind listener %s to port %d (%s: %s)", zl.Name, zl.Port, f.shown, f.reason)
	switch {
	case !f.retryable():
		b.WriteString("; fix that, then restart the zone proxy (Envoy does not retry a listener it rejected)")
		return b.String(), true
	case f.noAddress():
		b.WriteString(": the address is not on this host; the agent restarts Envoy as soon as it is")
		b.WriteString(noRetryWords)
		return b.String(), true
	case f.holders != "":
		b.WriteString(": another process listens on it: " + f.holders)
	case !f.holdersAt.IsZero():
		b.WriteString(": no listening socket on it is visible to the agent")
	}
	b.WriteString("; the agent restarts Envoy as soon as the port is free")
	b.WriteString(noRetryWords)
	return b.String(), true
}
