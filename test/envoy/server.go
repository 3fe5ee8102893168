package main

import (
	"runtime"
	"sort"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

const (
	typeCluster  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEndpoint = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	typeListener = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRoute    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	typeSecret   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// Envoy's default initial_fetch_timeout when a config source leaves it unset.
const defaultInitialFetchTimeout = 15 * time.Second

type xdsResource struct {
	name      string
	version   string
	msg       proto.Message
	updated   time.Time
	afterInit bool // arrived after its init phase, so it warms before going active
}

type depKey struct{ typ, name string }

// stopType records what /drain_listeners stopped.
type stopType int

const (
	stopNone stopType = iota
	stopInbound
	stopAll
)

// dep is something a resource waits for before it is warm: a CDS/LDS first
// response, or an EDS/SDS/RDS resource, bounded by initial_fetch_timeout.
type dep struct {
	requested time.Time
	timeout   time.Duration
	done      bool
	ads       bool
}

type server struct {
	o        *options
	log      *logger
	boot     *bootstrapv3.Bootstrap
	node     *corev3.Node
	start    time.Time
	stats    *statStore
	drainFor time.Duration
	build    string // /server_info's version: what --version prints after "version: "
	// holdAccept leaves accepted-to-be connections in the kernel's queue
	// (the ENVOY_STANDIN_HOLD_ACCEPT hook).
	holdAccept bool

	// accessLogs holds the access-log files opened by listeners.
	accessLogs *accessLogManager

	mu             sync.Mutex
	res            map[string]map[string]*xdsResource // CDS, EDS, RDS, SDS
	versionInfo    map[string]string
	staticClusters []*clusterv3.Cluster
	staticSecrets  map[string]*tlsv3.Secret
	listeners      map[string]*activeListener
	drainingLs     map[*activeListener]bool
	listenerErrors map[string]*adminv3.UpdateFailureState
	deps           map[depKey]*dep
	cdsDone        bool
	cmDone         bool
	ldsDone        bool
	initDone       bool
	initClusters   []string
	initListeners  []string
	healthFailed   bool
	drainSequence  bool
	stopped        stopType

	kick chan struct{} // the ADS stream recomputes its subscriptions
	exit chan int
	done chan struct{} // closed at shutdown
}

func newServer(o *options, log *logger, boot *bootstrapv3.Bootstrap) *server {
	s := &server{
		o:              o,
		log:            log,
		boot:           boot,
		node:           effectiveNode(boot, o),
		start:          time.Now(),
		build:          envoyBuild,
		stats:          newStatStore(),
		drainFor:       time.Duration(o.drainTimeS) * time.Second,
		res:            map[string]map[string]*xdsResource{typeCluster: {}, typeEndpoint: {}, typeRoute: {}, typeSecret: {}},
		versionInfo:    map[string]string{},
		staticSecrets:  map[string]*tlsv3.Secret{},
		listeners:      map[string]*activeListener{},
		listenerErrors: map[string]*adminv3.UpdateFailureState{},
		deps:           map[depKey]*dep{},
		kick:           make(chan struct{}, 1),
		exit:           make(chan int, 1),
		done:           make(chan struct{}),
	}
	for _, sec := range boot.GetStaticResources().GetSecrets() {
		s.staticSecrets[sec.GetName()] = sec
	}
	s.staticClusters = boot.GetStaticResources().GetClusters()
	s.accessLogs = newAccessLogManager(time.Duration(o.fileFlushIntervalMsec)*time.Millisecond, s.stats, log)
	// Checked by loadBootstrap already.
	_ = s.stats.setTagSpecifiers(tagSpecs(boot), useDefaultTags(boot), o.statsTags)
	dr := boot.GetDynamicResources()
	if cds := dr.GetCdsConfig(); cds != nil {
		s.addDep(depKey{typeCluster, ""}, cds)
	} else {
		s.cdsDone = true
	}
	s.initStats()
	return s
}

func fetchTimeout(cs *corev3.ConfigSource) time.Duration {
	if cs.GetInitialFetchTimeout() == nil {
		return defaultInitialFetchTimeout
	}
	return cs.GetInitialFetchTimeout().AsDuration()
}

func (s *server) addDep(k depKey, cs *corev3.ConfigSource) *dep {
	if d, ok := s.deps[k]; ok {
		return d
	}
	d := &dep{requested: time.Now(), timeout: fetchTimeout(cs), ads: cs.GetAds() != nil}
	if !d.ads && k.name != "" {
		s.log.config(lvlWarn, "source/common/config/subscription_factory_impl.cc:80",
			"config source for %s '%s' is not ADS; this Envoy stand-in only fetches over ADS", typeShort(k.typ), k.name)
	}
	s.deps[k] = d
	return d
}

func typeShort(t string) string { return typeName(t) }

// depSatisfied: the resource arrived, a response naming it was handled, or
// its initial fetch timeout passed.
func (s *server) depSatisfied(k depKey) bool {
	if k.name != "" {
		if _, ok := s.res[k.typ][k.name]; ok {
			return true
		}
	}
	d := s.deps[k]
	if d == nil {
		return false
	}
	if d.done {
		return true
	}
	if d.timeout > 0 && time.Since(d.requested) >= d.timeout {
		d.done = true
		s.log.config(lvlWarn, "source/extensions/config_subscription/grpc/grpc_subscription_impl.cc:125",
			"%s: initial fetch timeout for '%s'", typeName(k.typ), k.name)
		return true
	}
	return false
}

func (s *server) markReceived(typ string, names []string) {
	if d := s.deps[depKey{typ, ""}]; d != nil && (typ == typeCluster || typ == typeListener) {
		d.done = true
	}
	for _, n := range names {
		if d := s.deps[depKey{typ, n}]; d != nil {
			d.done = true
		}
	}
}

func (s *server) resourceWarm(deps []depRef) bool {
	for _, d := range deps {
		if !s.depSatisfied(depKey{d.typ, d.name}) {
			return false
		}
	}
	return true
}

func (s *server) clusterWarm(c *clusterv3.Cluster) bool { return s.resourceWarm(clusterDeps(c)) }

// evalInit advances Envoy's start-up: CDS first response, cluster manager
// init (warm clusters), then LDS and listener warming, then LIVE.
func (s *server) evalInit() {
	if !s.cdsDone {
		if !s.depSatisfied(depKey{typeCluster, ""}) {
			return
		}
		s.cdsDone = true
		s.initClusters = s.resourceNames(typeCluster)
	}
	if !s.cmDone {
		for _, c := range s.staticClusters {
			if !s.clusterWarm(c) {
				return
			}
		}
		for _, n := range s.initClusters {
			if r, ok := s.res[typeCluster][n]; ok && !s.clusterWarm(r.msg.(*clusterv3.Cluster)) {
				return
			}
		}
		s.cmDone = true
		s.log.upstream(lvlInfo, "source/common/upstream/cluster_manager_impl.cc:249", "cm init: all clusters initialized")
		s.log.main(lvlInfo, "all clusters initialized. initializing init manager")
		if lds := s.boot.GetDynamicResources().GetLdsConfig(); lds != nil {
			s.addDep(depKey{typeListener, ""}, lds)
		} else {
			s.ldsDone = true
			s.initListeners = s.listenerNames()
		}
		s.kickADS()
	}
	if !s.ldsDone {
		if !s.depSatisfied(depKey{typeListener, ""}) {
			return
		}
		s.ldsDone = true
		s.initListeners = s.listenerNames()
	}
	if !s.initDone {
		for _, n := range s.initListeners {
			if l, ok := s.listeners[n]; ok && !s.resourceWarm(listenerDeps(l.cfg)) {
				return
			}
		}
		s.initDone = true
		s.log.config(lvlInfo, "source/common/listener_manager/listener_manager_impl.cc:930", "all dependencies initialized. starting workers")
	}
	s.startListeners()
}

func (s *server) resourceNames(typ string) []string {
	out := make([]string, 0, len(s.res[typ]))
	for n := range s.res[typ] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *server) listenerNames() []string {
	out := make([]string, 0, len(s.listeners))
	for n := range s.listeners {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *server) kickADS() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *server) stateLocked() adminv3.ServerInfo_State {
	switch {
	case !s.cmDone:
		return adminv3.ServerInfo_PRE_INITIALIZING
	case !s.initDone:
		return adminv3.ServerInfo_INITIALIZING
	case s.healthFailed:
		return adminv3.ServerInfo_DRAINING
	}
	return adminv3.ServerInfo_LIVE
}

func (s *server) state() adminv3.ServerInfo_State {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evalInit()
	return s.stateLocked()
}

func (s *server) initStats() {
	s.stats.gauge("control_plane.connected_state")
	s.stats.gauge("control_plane.pending_requests")
	s.stats.counter("control_plane.rate_limit_enforced")
	s.stats.textReadout("control_plane.identifier")
	s.stats.gauge("server.live").set(1)
	s.stats.gauge("server.concurrency").set(int64(s.o.concurrency))
	s.stats.gauge("server.hot_restart_epoch").set(int64(s.o.restartEpoch))
	s.stats.gauge("server.total_connections")
	s.stats.gauge("server.parent_connections")
	s.stats.gauge("server.uptime")
	// Envoy refreshes server.state on its stats flush timer only.
	s.stats.gauge("server.state").set(int64(adminv3.ServerInfo_PRE_INITIALIZING))
	s.stats.gauge("server.version").set(envoyVersionStat())
	s.stats.gauge("server.memory_allocated")
	s.stats.gauge("server.memory_heap_size")
	s.stats.gauge("server.memory_physical_size")
	s.stats.counter("server.envoy_bug_failures")
	s.stats.counter("server.debug_assertion_failures")
	s.stats.counter("server.dynamic_unknown_fields")
	s.stats.counter("server.static_unknown_fields")
	for _, n := range []string{"listener_added", "listener_removed", "listener_modified", "listener_create_failure", "listener_create_success", "listener_in_place_updated"} {
		s.stats.counter("listener_manager." + n)
	}
	for _, n := range []string{"cluster_added", "cluster_removed", "cluster_modified", "cluster_updated"} {
		s.stats.counter("cluster_manager." + n)
	}
	s.stats.gauge("listener_manager.workers_started")
	if s.boot.GetDynamicResources().GetCdsConfig() != nil {
		for _, n := range []string{"update_attempt", "update_success", "update_rejected", "update_failure", "init_fetch_timeout"} {
			s.stats.counter("cluster_manager.cds." + n)
		}
		s.stats.gauge("cluster_manager.cds.version")
	}
	if s.boot.GetDynamicResources().GetLdsConfig() != nil {
		for _, n := range []string{"update_attempt", "update_success", "update_rejected", "update_failure", "init_fetch_timeout"} {
			s.stats.counter("listener_manager.lds." + n)
		}
		s.stats.gauge("listener_manager.lds.version")
	}
	s.updateGaugesLocked()
}

// envoyVersionStat is server.version: the first 6 hex digits of the SHA.
func envoyVersionStat() int64 {
	var v int64
	for _, c := range envoyRevision[:6] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= int64(c - '0')
		default:
			v |= int64(c-'a') + 10
		}
	}
	return v
}

func (s *server) updateGaugesLocked() {
	active, warming := len(s.staticClusters), 0
	for _, r := range s.res[typeCluster] {
		if r.afterInit && !s.clusterWarm(r.msg.(*clusterv3.Cluster)) {
			warming++
		} else {
			active++
		}
	}
	s.stats.gauge("cluster_manager.active_clusters").set(int64(active))
	s.stats.gauge("cluster_manager.warming_clusters").set(int64(warming))
	la, lw, ld := 0, 0, 0
	for _, l := range s.listeners {
		if l.afterInit && !s.resourceWarm(listenerDeps(l.cfg)) {
			lw++
		} else {
			la++
		}
	}
	for _, l := range s.drainingListeners() {
		_ = l
		ld++
	}
	s.stats.gauge("listener_manager.total_listeners_active").set(int64(la))
	s.stats.gauge("listener_manager.total_listeners_warming").set(int64(lw))
	s.stats.gauge("listener_manager.total_listeners_draining").set(int64(ld))
	if s.initDone {
		s.stats.gauge("listener_manager.workers_started").set(1)
	}
}

// flushStats refreshes the gauges Envoy only updates on its stats flush
// timer (stats_flush_interval, 5 s by default).
func (s *server) flushStats() {
	s.stats.gauge("server.uptime").set(int64(time.Since(s.start).Seconds()))
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.stats.gauge("server.memory_allocated").set(int64(m.HeapAlloc))
	s.stats.gauge("server.memory_heap_size").set(int64(m.HeapSys))
	s.stats.gauge("server.memory_physical_size").set(int64(m.Sys))
	s.mu.Lock()
	s.evalInit()
	s.stats.gauge("server.state").set(int64(s.stateLocked()))
	var total int64
	for _, l := range s.listeners {
		total += l.conns.count()
	}
	for _, l := range s.drainingListeners() {
		total += l.conns.count()
	}
	s.mu.Unlock()
	s.stats.gauge("server.total_connections").set(total)
}

func (s *server) statsFlushInterval() time.Duration {
	if d := s.boot.GetStatsFlushInterval(); d != nil {
		return d.AsDuration()
	}
	return 5 * time.Second
}

// housekeeping re-evaluates initial fetch timeouts and flushes stats.
func (s *server) housekeeping() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flush := time.NewTicker(s.statsFlushInterval())
	defer flush.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			s.mu.Lock()
			before := s.cmDone
			s.evalInit()
			s.updateGaugesLocked()
			after := s.cmDone
			s.mu.Unlock()
			if before != after {
				s.kickADS()
			}
		case <-flush.C:
			s.flushStats()
		}
	}
}
