package main

import (
	"net"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// accepted takes a new (already registered) socket through the listener filters and the filter
// chain match, as ActiveTcpSocket and ActiveStreamListenerBase do: only a
// socket that passed both becomes a connection (downstream_cx_active).
func (l *activeListener) accepted(c net.Conn, st *statStore, log *logger) {
	defer func() {
		c.Close()
		l.conns.remove(c)
	}()
	stats := l.conns.stats
	info := socketInfo{local: c.LocalAddr(), remote: c.RemoteAddr(), transport: "raw_buffer"}
	var peeked []byte
	if l.inspector != nil {
		if l.filtersTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(l.filtersTimeout))
		}
		var res inspectResult
		res, peeked = l.inspector.inspect(c, &info, st, log)
		c.SetReadDeadline(time.Time{})
		switch res {
		case inspectTimeout:
			stats.preTimeout.inc()
			log.logf(lvlDebug, "conn_handler", "source/common/listener_manager/active_tcp_socket.cc:49",
				"listener filter times out after %d ms", l.filtersTimeout.Milliseconds())
			if !l.continueOnTimeout {
				return
			}
			log.logf(lvlDebug, "conn_handler", "source/common/listener_manager/active_tcp_socket.cc:53", "fallback to default listener filter")
			info = socketInfo{local: info.local, remote: info.remote, transport: "raw_buffer"}
		case inspectRemoteClose:
			stats.filterClose.inc()
			return
		case inspectReadError:
			stats.filterError.inc()
			return
		case inspectClosed:
			return
		}
	}
	fc := matchFilterChain(l.cfg, &info)
	if fc == nil {
		stats.noFilterChain.inc()
		log.logf(lvlDebug, "conn_handler", "source/common/listener_manager/active_stream_listener_base.cc:40",
			"closing connection from %s: no matching filter chain found", info.remote)
		return
	}
	id := l.conns.activate(c)
	log.logf(lvlDebug, "conn_handler", "source/common/listener_manager/active_tcp_listener.cc:160",
		"[Tags: \"ConnectionId\":\"%d\"] new connection from %s", id, info.remote)
	l.serveConn(withReplay(c, peeked), fc)
}

// serveConn runs a connection on its filter chain (chains.go).
func (l *activeListener) serveConn(c net.Conn, fc *listenerv3.FilterChain) {
	l.runtime.serveConn(c, fc)
}
