package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
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
// agent says why the listener is missing and who holds its port, watches
// the port, and restarts Envoy in place (as an undrain does) once the port
// is free: a new Envoy asks for every listener afresh and binds it.

// listenerTypeURL is the LDS resource type.
const listenerTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

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

// endRebind ends a serving period so that Envoy restarts and binds a zone
// listener whose port is free again. -1: outside maintenance.go's iota
// run, so an end added there cannot take its value.
const endRebind serveEnd = -1

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

// bindFailures is what the agent knows of rejected zone listeners, fed by
// the relay's NACKs, and the pacing of the restarts that retry them.
type bindFailures struct {
	mu       sync.Mutex
	failed   map[string]*bindFailure // by listener name
	restarts int                     // restarts for a freed port since the zone listeners were last all in Envoy
	last     time.Time               // the last of them
	retry    string                  // what the pending restart is for, for its log and detail
}

// bindState is the agent's record of zone listeners Envoy could not bind.
func (a *Agent) bindState() *bindFailures { return &a.binds }

// envoyRejected is the relay's Events.Rejected: a NACK of a zone listener
// that could not bind is remembered for the listener check, which says so
// and retries once the port is free. It runs on the relay's goroutine, so
// it only parses and records.
func (a *Agent) envoyRejected(r xds.Rejection) {
	if r.TypeURL != listenerTypeURL {
		return
	}
	want := expectedListeners(a.cfg)
	for _, e := range parseBindErrors(r.Message) {
		zl, ok := e.zoneListener(want)
		if !ok {
			continue
		}
		f := &bindFailure{listener: zl.name, port: zl.port, addr: e.addr, shown: e.shown, reason: e.reason}
		a.bindState().record(f)
		a.log.Warn("Envoy could not bind a zone listener and runs without it; it does not try again by itself",
			zap.String("listener", zl.name), zap.String("address", e.shown), zap.String("error", e.reason),
			zap.Bool("retried once free", f.retryable()), zap.Bool("cached configuration", r.FromCache))
	}
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

// pendingRestart is what the restart asked for is for.
func (b *bindFailures) pendingRestart() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retry
}

// restarted forgets the old Envoy's failures and counts the restart.
func (b *bindFailures) restarted(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.failed)
	b.restarts++
	b.last = now
	b.retry = ""
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
func (e envoyBindError) zoneListener(want []zoneListener) (zoneListener, bool) {
	if i := slices.IndexFunc(want, func(zl zoneListener) bool { return zl.name == e.listener }); i >= 0 {
		return want[i], true
	}
	if e.addr.IsValid() {
		if i := slices.IndexFunc(want, func(zl zoneListener) bool { return zl.port == uint32(e.addr.Port()) }); i >= 0 {
			return want[i], true
		}
	}
	return zoneListener{}, false
}

// probeAddr is the address to check for f: Envoy's, else the listener's.
func (f *bindFailure) probeAddr(zl zoneListener) (netip.AddrPort, bool) {
	if f.addr.IsValid() {
		return f.addr, true
	}
	ip, err := netip.ParseAddr(zl.host)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(zl.port)), true
}

// bindable reports whether Envoy could bind ap now: a socket with
// SO_REUSEADDR, as Envoy's listen sockets have, is bound and closed at
// once, without listening, so that no connection is ever taken. Without
// SO_REUSEPORT it is stricter than Envoy, never looser. err: the agent
// cannot tell (it may not bind what Envoy may).
func bindable(ap netip.AddrPort) (bool, error) {
	ip := ap.Addr().Unmap()
	family := syscall.AF_INET
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	if ip.Is6() {
		family = syscall.AF_INET6
		zone := 0
		if z := ip.Zone(); z != "" {
			if ifi, err := net.InterfaceByName(z); err == nil {
				zone = ifi.Index
			}
		}
		sa = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16(), ZoneId: uint32(zone)}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return false, err
	}
	switch err := syscall.Bind(fd, sa); err {
	case nil:
		return true, nil
	case syscall.EADDRINUSE, syscall.EADDRNOTAVAIL:
		return false, nil
	default:
		return false, err
	}
}

// portHolder is a process with a listening socket that keeps Envoy from
// binding a port.
type portHolder struct {
	pid  int // 0: not visible to the agent (another user's, ProtectProc)
	comm string
	uid  int
}

func (h portHolder) String() string {
	if h.pid > 0 {
		return fmt.Sprintf("pid %d (%s)", h.pid, h.comm)
	}
	who := "uid " + strconv.Itoa(h.uid)
	if u, err := user.LookupId(strconv.Itoa(h.uid)); err == nil {
		who = fmt.Sprintf("user %s (uid %d)", u.Username, h.uid)
	}
	return "a process of " + who + " that the agent cannot see"
}

// portHolders lists who listens on a port that conflicts with ap: the
// same port on the same address, or where either is a wildcard. Sockets
// come from /proc/self/net/tcp and tcp6 (visible under ProcSubset=pid),
// processes from /proc/<pid>/fd where readable; a socket of a process the
// agent cannot see is told by its uid.
func portHolders(ap netip.AddrPort) ([]portHolder, error) {
	socks, err := procnet.Sockets()
	if err != nil {
		return nil, err
	}
	var held []procnet.Socket
	var inodes []uint64
	for _, s := range socks {
		if s.State == procnet.Listen && s.Local.Port() == ap.Port() && addrsConflict(s.Local.Addr(), ap.Addr()) {
			held = append(held, s)
			inodes = append(inodes, s.Inode)
		}
	}
	procs := procnet.Holders(inodes)
	var out []portHolder
	for _, s := range held {
		ps := procs[s.Inode]
		if len(ps) == 0 {
			out = append(out, portHolder{uid: int(s.UID)})
		}
		for _, p := range ps {
			out = append(out, portHolder{pid: p.PID, comm: p.Comm, uid: int(s.UID)})
		}
	}
	slices.SortFunc(out, func(a, b portHolder) int {
		if (a.pid == 0) != (b.pid == 0) {
			return b.pid - a.pid // visible processes first
		}
		if a.pid != b.pid {
			return a.pid - b.pid
		}
		return a.uid - b.uid
	})
	return slices.Compact(out), nil
}

// addrsConflict: a socket on a (of the same port) keeps one on b from
// binding. An IPv6 wildcard takes IPv4 addresses too (unless IPV6_V6ONLY,
// which /proc does not show).
func addrsConflict(a, b netip.Addr) bool {
	a, b = a.Unmap(), b.Unmap()
	if a.Is4() == b.Is4() {
		return a == b || a.IsUnspecified() || b.IsUnspecified()
	}
	if a.Is6() {
		return a.IsUnspecified()
	}
	return b.IsUnspecified()
}

func holdersText(hs []portHolder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return strings.Join(parts, ", ")
}

// rebindDue is closed when Envoy should restart to bind a freed port.
func (w *listenerWatch) rebindDue() <-chan struct{} {
	w.rebindOnce.Do(func() { w.rebind = make(chan struct{}) })
	return w.rebind
}

// checkBindFailures looks at the missing zone listeners Envoy rejected:
// it finds who holds their ports, now and then, and asks for a restart
// once one is free, paced by the restarts before it.
func (w *listenerWatch) checkBindFailures(missing []zoneListener) {
	if w.rebindAsked {
		return
	}
	b := w.a.bindState()
	now := time.Now()
	for _, zl := range missing {
		f := b.failure(zl.name)
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
				b.setHolders(zl.name, holdersText(hs), now)
			}
			continue
		}
		if !w.a.xds.newEnvoyConfigured() {
			if !w.unconfiguredLogged {
				w.unconfiguredLogged = true
				w.a.log.Warn("the port of a rejected zone listener is free again, but a new Envoy would get no configuration now (the control plane does not answer and no cached configuration is served): restarting it once one of them is there",
					zap.String("listener", zl.name), zap.Uint32("port", zl.port))
			}
			continue
		}
		if ok, next := b.mayRestart(now); !ok {
			if !w.pacedLogged {
				w.pacedLogged = true
				w.a.log.Warn("the port of a rejected zone listener is free again, but Envoy was restarted for it lately; restarting it again later",
					zap.String("listener", zl.name), zap.Uint32("port", zl.port), zap.Time("not before", next))
			}
			continue
		}
		b.askRestart(fmt.Sprintf("listener %s on port %d", zl.name, zl.port))
		w.rebindAsked = true
		w.rebindDue() // made, if not yet
		close(w.rebind)
		return
	}
}

// noRetryWords say why the agent, not Envoy, acts.
const noRetryWords = " (Envoy does not retry a listener it rejected, and the control plane does not send it again)"

// bindDetail is what NO_ZONE_LISTENER says of zl when Envoy rejected it
// for its bind; false if it did not.
func (w *listenerWatch) bindDetail(zl zoneListener) (string, bool) {
	f := w.a.bindState().failure(zl.name)
	if f == nil {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Envoy could not bind listener %s to port %d (%s: %s)", zl.name, zl.port, f.shown, f.reason)
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

// restartForBind replaces Envoy with a new one from the same bootstrap, so
// that it binds a zone listener whose port is free again. Like the
// undrain's restart, it returns once the new one is LIVE, or nil on a stop
// meanwhile.
func (a *Agent) restartForBind(ctx context.Context, e *supervised) error {
	b := a.bindState()
	why := b.pendingRestart()
	a.log.Info("restarting Envoy so that it binds "+why+", free again: Envoy does not retry a listener it rejected", zap.Int("pid", e.proc.PID()))
	// What the old Envoy rejected is not the new one's.
	return a.restartInPlace(ctx, e, "restarting Envoy so that it binds "+why+", free again", "after the restart for "+why,
		func() { b.restarted(time.Now()) })
}
