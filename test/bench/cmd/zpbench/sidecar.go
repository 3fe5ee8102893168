package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// sidecarLoad is a zone's sidecars as far as a zone egress sees them: new
// connections at a steady rate, each a TCP connect and a TLS ClientHello
// naming the mesh's external service, each to one of the zone egresses
// the control plane hands out at that moment (round robin).
type sidecarLoad struct {
	cp       *controlplane.Server
	mesh     string
	started  time.Time
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	conns    []connOutcome
	noEgress []time.Time // ticks with no egress handed out
}

// connOutcome is one connection's fate.
type connOutcome struct {
	at        time.Time
	dataplane string
	port      uint32
	kind      string // outcomeOK, outcomeRefused, outcomeReset, outcomeOther
	err       string
}

const (
	outcomeOK      = "ok"
	outcomeRefused = "refused"
	outcomeReset   = "reset"
	outcomeOther   = "other error"
)

// resetWatch is how long a connection that sent its ClientHello is read
// for a reset: a listener closed with the socket in its accept queue
// resets it after the handshake succeeded.
const resetWatch = 300 * time.Millisecond

func startSidecarLoad(cp *controlplane.Server, mesh string, perSecond int) *sidecarLoad {
	s := &sidecarLoad{cp: cp, mesh: mesh, started: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	sni := controlplane.DestinationSNI(mesh, "egress")
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			set := cp.ZoneEgresses(mesh)
			if len(set) == 0 {
				s.mu.Lock()
				s.noEgress = append(s.noEgress, time.Now())
				s.mu.Unlock()
				continue
			}
			e := set[i%len(set)]
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.record(dialOnce(e, sni))
			}()
		}
	}()
	return s
}

func dialOnce(e controlplane.ZoneEgress, sni string) connOutcome {
	o := connOutcome{at: time.Now(), dataplane: e.Dataplane, port: e.Port, kind: outcomeOK}
	c, err := harness.DialTLSHello(net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port))), sni)
	if err == nil {
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(resetWatch))
		_, err = c.Read(make([]byte, 1))
		if err == nil || !strings.Contains(err.Error(), "reset") {
			return o // an answer, the proxy's close, or nothing yet: served
		}
	}
	o.err = err.Error()
	switch msg := o.err; {
	case strings.Contains(msg, "connection refused"):
		o.kind = outcomeRefused
	case strings.Contains(msg, "reset") || strings.Contains(msg, "broken pipe"):
		o.kind = outcomeReset
	default:
		o.kind = outcomeOther
	}
	return o
}

func (s *sidecarLoad) record(o connOutcome) {
	s.mu.Lock()
	s.conns = append(s.conns, o)
	s.mu.Unlock()
}

// sidecarsOn waits until kuma-cp hands out n egresses of mesh, then starts
// a load of perSecond connections and checks its first 2 s kept the rate.
func (b *bed) sidecarsOn(mesh string, n, perSecond int) (*sidecarLoad, error) {
	if !waitUntil(15*time.Second, 10*time.Millisecond, func() bool { return len(b.cp.ZoneEgresses(mesh)) == n }) {
		return nil, fmt.Errorf("kuma-cp does not hand out %d egresses of %s: %+v", n, mesh, b.cp.ZoneEgresses(mesh))
	}
	load := startSidecarLoad(b.cp, mesh, perSecond)
	time.Sleep(2 * time.Second)
	if got := load.count(); got < perSecond {
		load.finish()
		return nil, fmt.Errorf("the sidecar load made %d connections in its first 2 s, want about %d", got, 2*perSecond)
	}
	return load, nil
}

// failedConns are the connections refused or reset (or failing otherwise).
func failedConns(conns []connOutcome) []connOutcome {
	var out []connOutcome
	for _, c := range conns {
		if c.kind != outcomeOK {
			out = append(out, c)
		}
	}
	return out
}

// finish stops the load, waits for the connections under way and returns
// every outcome and the ticks with no egress to send to. Calling it again
// returns the same.
func (s *sidecarLoad) finish() ([]connOutcome, []time.Time) {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.noEgress
}

// count is how many connections the load has made so far.
func (s *sidecarLoad) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
