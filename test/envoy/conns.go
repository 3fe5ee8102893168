package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// listenerStats is one listener's ListenerStats plus the per-worker
// PerHandlerListenerStats (listener.<prefix>.worker_<N>.downstream_cx_*),
// which Envoy keeps next to the listener-wide totals.
type listenerStats struct {
	cxActive, cxTotal, cxDestroy *stat
	preActive, preTimeout        *stat
	filterClose, filterError     *stat
	noFilterChain                *stat
	workerActive, workerTotal    []*stat
}

func newListenerStats(st *statStore, prefix string, workers uint32) *listenerStats {
	if workers < 1 {
		workers = 1
	}
	ls := &listenerStats{
		cxActive:      st.gauge(prefix + "downstream_cx_active"),
		cxTotal:       st.counter(prefix + "downstream_cx_total"),
		cxDestroy:     st.counter(prefix + "downstream_cx_destroy"),
		preActive:     st.gauge(prefix + "downstream_pre_cx_active"),
		preTimeout:    st.counter(prefix + "downstream_pre_cx_timeout"),
		filterClose:   st.counter(prefix + "downstream_listener_filter_remote_close"),
		filterError:   st.counter(prefix + "downstream_listener_filter_error"),
		noFilterChain: st.counter(prefix + "no_filter_chain_match"),
	}
	for i := uint32(0); i < workers; i++ {
		ls.workerActive = append(ls.workerActive, st.gauge(fmt.Sprintf("%sworker_%d.downstream_cx_active", prefix, i)))
		ls.workerTotal = append(ls.workerTotal, st.counter(fmt.Sprintf("%sworker_%d.downstream_cx_total", prefix, i)))
	}
	return ls
}

// connSet holds a listener's accepted sockets: those still in the listener
// filters (counted as downstream_pre_cx_active) and the connections made
// from them (downstream_cx_active, on one worker each).
type connSet struct {
	mu    sync.Mutex
	m     map[net.Conn]connState
	stats *listenerStats
	next  atomic.Uint32 // turns of workers sharing one socket
}

type connState struct {
	worker int  // the worker, or anyWorker until a turn is taken
	active bool // past the listener filters: a connection
}

// anyWorker marks a socket accepted from a socket all workers share.
const anyWorker = -1

func newConnSet(stats *listenerStats) *connSet {
	return &connSet{m: map[net.Conn]connState{}, stats: stats}
}

// accept registers a socket that enters the listener filters, accepted by
// worker (anyWorker: the workers take turns).
func (c *connSet) accept(conn net.Conn, worker int) {
	if worker >= len(c.stats.workerActive) {
		worker = anyWorker
	}
	c.mu.Lock()
	c.m[conn] = connState{worker: worker}
	c.mu.Unlock()
	c.stats.preActive.inc()
}

// activate turns a socket that passed the listener filters and matched a
// filter chain into a connection on its worker; it returns the
// connection's number, for Envoy's ConnectionId tag.
func (c *connSet) activate(conn net.Conn) int64 {
	c.mu.Lock()
	st, ok := c.m[conn]
	if ok {
		if st.worker == anyWorker {
			st.worker = int(c.next.Add(1)-1) % len(c.stats.workerActive)
		}
		st.active = true
		c.m[conn] = st
	}
	c.mu.Unlock()
	if !ok {
		return 0
	}
	w := st.worker
	c.stats.preActive.dec()
	c.stats.cxActive.inc()
	c.stats.cxTotal.inc()
	c.stats.workerActive[w].inc()
	c.stats.workerTotal[w].inc()
	return c.stats.cxTotal.get()
}

// remove forgets a closed socket.
func (c *connSet) remove(conn net.Conn) {
	c.mu.Lock()
	st, ok := c.m[conn]
	delete(c.m, conn)
	c.mu.Unlock()
	switch {
	case !ok:
	case !st.active:
		c.stats.preActive.dec()
	default:
		c.stats.cxActive.dec()
		c.stats.cxDestroy.inc()
		c.stats.workerActive[st.worker].dec()
	}
}

// count is the number of connections (sockets still in the listener
// filters are not connections yet).
func (c *connSet) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, st := range c.m {
		if st.active {
			n++
		}
	}
	return n
}

// sockets is the number of accepted sockets, connections or not.
func (c *connSet) sockets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *connSet) closeAll() {
	c.mu.Lock()
	conns := make([]net.Conn, 0, len(c.m))
	for conn := range c.m {
		conns = append(conns, conn)
	}
	c.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
	}
}
