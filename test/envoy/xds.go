package main

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// incoming is one resource of an xDS response, already unpacked.
type incoming struct {
	name    string
	version string
	msg     proto.Message
	raw     *anypb.Any
}

// update is one xDS response for a type: resources added or updated, names
// removed (delta, or computed from SotW state), and the response version.
type update struct {
	typ         string
	resources   []incoming
	removed     []string
	version     string
	unpackError []string
}

// apply validates and applies an update like the matching Envoy
// subscription callback, returning the NACK text ("" means ACK).
func (s *server) apply(u *update) string {
	s.mu.Lock()
	defer func() {
		s.evalInit()
		s.updateGaugesLocked()
		s.mu.Unlock()
	}()
	var msg string
	switch u.typ {
	case typeCluster:
		msg = s.applyClusters(u)
	case typeListener:
		msg = s.applyListeners(u)
	default:
		msg = s.applyGeneric(u)
	}
	names := make([]string, 0, len(u.resources))
	for _, r := range u.resources {
		names = append(names, r.name)
	}
	s.markReceived(u.typ, names)
	if msg == "" {
		s.versionInfo[u.typ] = u.version
	}
	return msg
}

func (s *server) dynamicValidator() *deepValidator {
	v := &deepValidator{rejectUnknown: s.o.rejectUnknownDynamic}
	if !s.o.rejectUnknownDynamic && !s.o.ignoreUnknownDynamic {
		// Envoy's default for dynamic config: warn and count.
		v.warnUnknown = func(typ string) {
			s.stats.counter("server.dynamic_unknown_fields").inc()
			s.log.logf(lvlWarn, "misc", "source/common/protobuf/message_validator_impl.cc:21",
				"Unknown field in dynamic config: type %s with unknown field set", typ)
		}
	}
	return v
}

func (s *server) applyClusters(u *update) string {
	s.stats.counter("cluster_manager.cds.update_attempt").inc()
	s.log.upstream(lvlInfo, "source/common/upstream/cds_api_helper.cc:32", "cds: add %d cluster(s), remove %d cluster(s)", len(u.resources), len(u.removed))
	errs := append([]string(nil), u.unpackError...)
	staticNames := map[string]bool{}
	for _, c := range s.staticClusters {
		staticNames[c.GetName()] = true
	}
	seen := map[string]bool{}
	added, skipped := 0, 0
	for _, r := range u.resources {
		c := r.msg.(*clusterv3.Cluster)
		if seen[c.GetName()] {
			errs = append(errs, fmt.Sprintf("duplicate cluster %s found", c.GetName()))
			continue
		}
		seen[c.GetName()] = true
		if err := s.dynamicValidator().message(c); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s", c.GetName(), err))
			continue
		}
		if err := checkCluster(c, s.staticSecrets); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s", c.GetName(), err))
			continue
		}
		old, exists := s.res[typeCluster][c.GetName()]
		if staticNames[c.GetName()] || (exists && proto.Equal(old.msg, c)) {
			s.log.upstream(lvlDebug, "source/common/upstream/cds_api_helper.cc:72", "cds: add/update cluster '%s' skipped", c.GetName())
			skipped++
			continue
		}
		s.res[typeCluster][c.GetName()] = &xdsResource{name: c.GetName(), version: r.version, msg: c, updated: time.Now(), afterInit: s.cmDone}
		if exists {
			s.stats.counter("cluster_manager.cluster_modified").inc()
		} else {
			s.stats.counter("cluster_manager.cluster_added").inc()
		}
		for _, d := range clusterDeps(c) {
			s.addDep(depKey{d.typ, d.name}, d.source)
		}
		s.log.upstream(lvlDebug, "source/common/upstream/cds_api_helper.cc:68", "cds: add/update cluster '%s'", c.GetName())
		added++
	}
	for _, n := range u.removed {
		if _, ok := s.res[typeCluster][n]; ok {
			delete(s.res[typeCluster], n)
			s.stats.counter("cluster_manager.cluster_removed").inc()
			s.log.upstream(lvlInfo, "source/common/upstream/cds_api_helper.cc:47", "cds: remove cluster '%s'", n)
		}
	}
	s.log.upstream(lvlInfo, "source/common/upstream/cds_api_helper.cc:85", "cds: added/updated %d cluster(s), skipped %d unmodified cluster(s)", added, skipped)
	if len(errs) > 0 {
		s.stats.counter("cluster_manager.cds.update_rejected").inc()
		return "Error adding/updating cluster(s) " + strings.Join(errs, ", ")
	}
	s.stats.counter("cluster_manager.cds.update_success").inc()
	return ""
}

func (s *server) applyListeners(u *update) string {
	s.stats.counter("listener_manager.lds.update_attempt").inc()
	var errs strings.Builder
	for _, e := range u.unpackError {
		errs.WriteString(e + "\n")
	}
	seen := map[string]bool{}
	// Removals first, so a listener moved to a new name can take the address.
	for _, n := range u.removed {
		if l, ok := s.listeners[n]; ok && !l.static {
			delete(s.listeners, n)
			delete(s.listenerErrors, n)
			s.drainRemoved(l)
			s.stats.counter("listener_manager.listener_removed").inc()
			s.log.upstream(lvlInfo, "source/common/listener_manager/lds_api.cc:70", "lds: remove listener '%s'", n)
		}
	}
	for _, r := range u.resources {
		l := r.msg.(*listenerv3.Listener)
		fail := func(err error) {
			fmt.Fprintf(&errs, "%s: %s\n", l.GetName(), err)
			s.listenerErrors[l.GetName()] = &adminv3.UpdateFailureState{
				FailedConfiguration: r.raw,
				LastUpdateAttempt:   timestamppb.Now(),
				Details:             err.Error(),
				VersionInfo:         r.version,
			}
			s.stats.counter("listener_manager.listener_create_failure").inc()
		}
		if seen[l.GetName()] {
			fail(fmt.Errorf("duplicate listener %s found", l.GetName()))
			continue
		}
		seen[l.GetName()] = true
		if err := s.dynamicValidator().message(l); err != nil {
			fail(err)
			continue
		}
		if err := checkListener(l, s.staticSecrets); err != nil {
			fail(err)
			continue
		}
		changed, err := s.addOrUpdateListener(l, r.version, false)
		if err != nil {
			fail(err)
			continue
		}
		delete(s.listenerErrors, l.GetName())
		if changed {
			s.log.upstream(lvlInfo, "source/common/listener_manager/lds_api.cc:91", "lds: add/update listener '%s'", l.GetName())
		} else {
			s.log.upstream(lvlDebug, "source/common/listener_manager/lds_api.cc:95", "lds: add/update listener '%s' skipped", l.GetName())
		}
	}
	if errs.Len() > 0 {
		s.stats.counter("listener_manager.lds.update_rejected").inc()
		return "Error adding/updating listener(s) " + errs.String()
	}
	s.stats.counter("listener_manager.lds.update_success").inc()
	return ""
}

// addOrUpdateListener binds (or keeps) the listener socket. Envoy binds at
// listener creation, so a busy port rejects the update.
func (s *server) addOrUpdateListener(l *listenerv3.Listener, version string, static bool) (bool, error) {
	old, exists := s.listeners[l.GetName()]
	if exists && proto.Equal(old.cfg, l) {
		return false, nil
	}
	// After /drain_listeners stopped them, Envoy skips listener updates.
	if s.stopped == stopAll || (s.stopped == stopInbound && l.GetTrafficDirection() == corev3.TrafficDirection_INBOUND) {
		s.log.config(lvlDebug, "source/common/listener_manager/listener_manager_impl.cc:470", "listener %s can not be added because listeners are stopped", l.GetName())
		return false, nil
	}
	addr, err := envoyAddr(l.GetAddress())
	if err != nil {
		return false, err
	}
	for name, other := range s.listeners {
		if name != l.GetName() && proto.Equal(other.cfg.GetAddress(), l.GetAddress()) && l.GetAddress().GetEnvoyInternalAddress() == nil {
			return false, fmt.Errorf("error adding listener: '%s' has duplicate address '%s' as existing listener", l.GetName(), addr)
		}
	}
	// Filter chains are built (access-log files opened) before the bind.
	runtime, err := s.buildListenerRuntime(l)
	if err != nil {
		return false, err
	}
	key := bindKey(l)
	var sock *boundSocket
	reuse := exists && !old.stopped && old.sock != nil && old.sock.key != "" && bindKey(old.cfg) == key
	if reuse {
		sock = old.sock
	} else if bindToPort(l) {
		reusePort := l.GetEnableReusePort() == nil || l.GetEnableReusePort().GetValue()
		if exists && old.sock != nil && bindKey(old.cfg) == key {
			// Same address on a stopped listener: release it before binding again.
			old.stop()
		}
		sock, err = bindAddress(l.GetAddress(), reusePort, int(s.o.concurrency))
		if err != nil {
			return false, err
		}
		if sock != nil {
			sock.key = key
		}
	}
	prefix := listenerStatPrefix(l.GetStatPrefix(), addr)
	al := &activeListener{
		name:       l.GetName(),
		cfg:        l,
		version:    version,
		updated:    time.Now(),
		addr:       addr,
		statPrefix: prefix,
		sock:       sock,
		static:     static,
		afterInit:  s.initDone,

		inspector:         listenerTLSInspector(l),
		filtersTimeout:    listenerFiltersTimeout(l),
		continueOnTimeout: l.GetContinueOnListenerFiltersTimeout(),
	}
	if al.inspector != nil {
		s.initTLSInspectorStats()
	}
	if reuse {
		al.conns, al.live = old.conns, old.live
	} else {
		al.conns = newConnSet(newListenerStats(s.stats, prefix, s.o.concurrency))
		al.live = &atomic.Pointer[activeListener]{}
	}
	al.runtime = runtime
	// An update on a kept socket leaves the old version serving until this
	// one starts (warm), as Envoy's warming listener replaces the active one.
	if !reuse {
		al.live.Store(al)
	}
	s.listeners[l.GetName()] = al
	for _, d := range listenerDeps(l) {
		s.addDep(depKey{d.typ, d.name}, d.source)
	}
	if exists {
		s.stats.counter("listener_manager.listener_modified").inc()
		if !reuse {
			s.drainRemoved(old)
		}
	} else {
		s.stats.counter("listener_manager.listener_added").inc()
	}
	return true, nil
}

// startListeners starts the listeners that may take connections now: none
// before the workers start (initialization done), then every warm one.
func (s *server) startListeners() {
	for _, name := range s.listenerNames() {
		l := s.listeners[name]
		if l == nil || l.started || l.stopped || !s.resourceWarm(listenerDeps(l.cfg)) {
			continue
		}
		s.startListener(l)
	}
}

// startListener is Envoy's doFinalPreWorkerListenerInit (listen() on each
// socket) followed by addListenerToWorker on every worker. A listen()
// failure removes the listener.
func (s *server) startListener(l *activeListener) {
	l.started = true
	backlog := backlogSomaxconn
	if b := l.cfg.GetTcpBacklogSize(); b != nil {
		backlog = int(b.GetValue())
	}
	if err := l.sock.listen(backlog); err != nil {
		s.log.config(lvlError, "source/common/listener_manager/listener_manager_impl.cc:741",
			"final pre-worker listener init for listener '%s' failed: %s", l.name, err)
		s.stats.counter("listener_manager.listener_create_failure").inc()
		delete(s.listeners, l.name)
		s.drainRemoved(l)
		s.stats.counter("listener_manager.listener_removed").inc()
		return
	}
	l.live.Store(l)
	if !s.holdAccept {
		l.serve(s.stats, s.log)
	}
	// Each worker's completion counts once.
	s.stats.counter("listener_manager.listener_create_success").add(int64(s.o.concurrency))
}

func bindToPort(l *listenerv3.Listener) bool {
	return l.GetBindToPort() == nil || l.GetBindToPort().GetValue()
}

// drainRemoved closes a removed listener's socket now and its connections
// after --drain-time-s, as Envoy drains listeners removed over LDS.
func (s *server) drainRemoved(l *activeListener) {
	l.stop()
	if l.conns.sockets() == 0 {
		if _, still := s.listenerByPrefix(l.statPrefix); !still {
			s.stats.removePrefix(l.statPrefix)
		}
		return
	}
	if s.drainingLs == nil {
		s.drainingLs = map[*activeListener]bool{}
	}
	s.drainingLs[l] = true
	go func() {
		select {
		case <-time.After(s.drainFor):
		case <-s.done:
		}
		l.conns.closeAll()
		s.mu.Lock()
		delete(s.drainingLs, l)
		if _, still := s.listenerByPrefix(l.statPrefix); !still {
			s.stats.removePrefix(l.statPrefix)
		}
		s.updateGaugesLocked()
		s.mu.Unlock()
	}()
}

func (s *server) listenerByPrefix(p string) (*activeListener, bool) {
	for _, l := range s.listeners {
		if l.statPrefix == p {
			return l, true
		}
	}
	return nil, false
}

func (s *server) drainingListeners() []*activeListener {
	out := make([]*activeListener, 0, len(s.drainingLs))
	for l := range s.drainingLs {
		out = append(out, l)
	}
	return out
}

// applyGeneric handles EDS, RDS and SDS resources.
func (s *server) applyGeneric(u *update) string {
	errs := append([]string(nil), u.unpackError...)
	for _, r := range u.resources {
		if err := s.dynamicValidator().message(r.msg); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if sec, ok := r.msg.(*tlsv3.Secret); ok {
			if tc := sec.GetTlsCertificate(); tc != nil && tc.GetCertificateChain() != nil {
				if _, err := loadKeyPair(tc); err != nil {
					errs = append(errs, err.Error())
					continue
				}
			}
		}
		old, exists := s.res[u.typ][r.name]
		if exists && proto.Equal(old.msg, r.msg) {
			continue
		}
		s.res[u.typ][r.name] = &xdsResource{name: r.name, version: r.version, msg: r.msg, updated: time.Now()}
		s.log.config(lvlDebug, "source/common/config/grpc_mux_impl.cc:300", "%s: received '%s'", typeName(u.typ), r.name)
	}
	for _, n := range u.removed {
		delete(s.res[u.typ], n)
	}
	if len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return ""
}

// wanted is what the ADS stream should be subscribed to right now.
type wanted struct {
	wildcard bool
	names    []string
}

// subscriptions lists the ADS subscriptions in Envoy's order: CDS (and the
// EDS/SDS its clusters need) before LDS (and its RDS/SDS), LDS only once the
// cluster manager has initialized.
func (s *server) subscriptions() (order []string, want map[string]wanted) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evalInit()
	dr := s.boot.GetDynamicResources()
	want = map[string]wanted{}
	names := map[string]map[string]bool{typeEndpoint: {}, typeSecret: {}, typeRoute: {}}
	addDeps := func(deps []depRef) {
		for _, d := range deps {
			if d.source.GetAds() != nil {
				names[d.typ][d.name] = true
			}
		}
	}
	for _, c := range s.staticClusters {
		addDeps(clusterDeps(c))
	}
	for _, r := range s.res[typeCluster] {
		addDeps(clusterDeps(r.msg.(*clusterv3.Cluster)))
	}
	for _, l := range s.listeners {
		addDeps(listenerDeps(l.cfg))
		// The version still serving while an update warms keeps its own.
		if cur := l.live.Load(); cur != nil && cur != l && cur.started {
			addDeps(listenerDeps(cur.cfg))
		}
	}
	list := func(t string) []string {
		out := make([]string, 0, len(names[t]))
		for n := range names[t] {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	if dr.GetCdsConfig().GetAds() != nil {
		want[typeCluster] = wanted{wildcard: true}
	}
	want[typeEndpoint] = wanted{names: list(typeEndpoint)}
	want[typeSecret] = wanted{names: list(typeSecret)}
	if s.cmDone && dr.GetLdsConfig().GetAds() != nil {
		want[typeListener] = wanted{wildcard: true}
	}
	want[typeRoute] = wanted{names: list(typeRoute)}
	// Resources nobody references any more are dropped, as Envoy does when
	// it unsubscribes.
	for _, t := range []string{typeEndpoint, typeSecret, typeRoute} {
		for n := range s.res[t] {
			if !names[t][n] {
				delete(s.res[t], n)
			}
		}
	}
	return []string{typeCluster, typeEndpoint, typeSecret, typeListener, typeRoute}, want
}

// knownVersions feeds initial_resource_versions when a delta stream restarts.
func (s *server) knownVersions(typ string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	if typ == typeListener {
		for n, l := range s.listeners {
			if !l.static {
				out[n] = l.version
			}
		}
		return out
	}
	for n, r := range s.res[typ] {
		out[n] = r.version
	}
	return out
}

// dynamicNames is the SotW view used to compute removals.
func (s *server) dynamicNames(typ string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == typeListener {
		var out []string
		for n, l := range s.listeners {
			if !l.static {
				out = append(out, n)
			}
		}
		return out
	}
	return s.resourceNames(typ)
}

func (s *server) lookupSecret(cfg *tlsv3.SdsSecretConfig) (*tlsv3.Secret, bool) {
	if cfg.GetSdsConfig() == nil {
		sec, ok := s.staticSecrets[cfg.GetName()]
		if !ok {
			return nil, true
		}
		return sec, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.res[typeSecret][cfg.GetName()]
	if !ok {
		return nil, false
	}
	return r.msg.(*tlsv3.Secret), true
}
