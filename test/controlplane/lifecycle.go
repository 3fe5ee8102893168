package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// kuma-cp's defaults (pkg/config/app/kuma-cp/kuma-cp.defaults.yaml) that
// the stream lifecycle mirrors when an Options field is zero.
const (
	// DefaultDeregistrationDelay is xdsServer.dataplaneDeregistrationDelay
	// (KUMA_XDS_DATAPLANE_DEREGISTRATION_DELAY).
	DefaultDeregistrationDelay = 10 * time.Second
	// DefaultCacheExpiration is store.cache.expirationTime
	// (KUMA_STORE_CACHE_EXPIRATION_TIME), which DataplaneLifecycle.register
	// sleeps before the proxy counts as connected.
	DefaultCacheExpiration = time.Second
	// DefaultEgressPropagation is the longest a change of the Dataplane
	// store takes to reach the zone's sidecars: the read-only manager's
	// LIST cache (store.cache.expirationTime, 1 s) feeds the mesh context
	// cache (the same TTL, 1 s), which each sidecar's watchdog reads every
	// xdsServer.dataplaneConfigurationRefreshInterval (1 s): 1+1+1 s.
	DefaultEgressPropagation = 2*DefaultCacheExpiration + time.Second
)

// Timings are the lifecycle durations in force (defaults applied; "none"
// is 0).
type Timings struct {
	DeregistrationDelay time.Duration
	CacheExpiration     time.Duration
	EgressPropagation   time.Duration
}

// MarshalJSON writes the durations as Go duration strings ("10s").
func (t Timings) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{
		"deregistrationDelay": t.DeregistrationDelay.String(),
		"cacheExpiration":     t.CacheExpiration.String(),
		"egressPropagation":   t.EgressPropagation.String(),
	})
}

// resolveTiming applies "zero = kuma-cp's default, negative = none".
func resolveTiming(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func resolveTimings(o Options) Timings {
	return Timings{
		DeregistrationDelay: resolveTiming(o.DeregistrationDelay, DefaultDeregistrationDelay),
		CacheExpiration:     resolveTiming(o.CacheExpiration, DefaultCacheExpiration),
		EgressPropagation:   resolveTiming(o.EgressPropagation, DefaultEgressPropagation),
	}
}

// Timings reports the lifecycle durations this server runs with.
func (s *Server) Timings() Timings { return s.timings }

// Kinds of DataplaneEvent.
const (
	DataplaneUpserted = "upserted"
	DataplaneDeleted  = "deleted"
)

// DataplaneListener is one networking.listeners[] entry of a stored
// Dataplane, enums by name ("ZoneEgress", "Ready").
type DataplaneListener struct {
	Type    string `json:"type"`
	Address string `json:"address"`
	Port    uint32 `json:"port"`
	State   string `json:"state"`
	Name    string `json:"name,omitempty"`
}

// DataplaneRecord is a Dataplane in the store.
type DataplaneRecord struct {
	Mesh   string            `json:"mesh"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// Spec is the Dataplane spec (networking, metrics, probes…) as the
	// node metadata dataplane.resource carried it, in JSON, without the
	// meta fields (type, mesh, name, labels, creationTime, …).
	Spec      json.RawMessage     `json:"spec"`
	Listeners []DataplaneListener `json:"listeners"`
	CreatedAt time.Time           `json:"creationTime"`
	UpdatedAt time.Time           `json:"modificationTime"`
	StreamID  int64               `json:"streamId"` // the stream whose registration wrote it last
}

// DataplaneEvent is one change of a Dataplane in the store.
type DataplaneEvent struct {
	At        time.Time           `json:"at"`
	Kind      string              `json:"kind"` // DataplaneUpserted or DataplaneDeleted
	Spec      json.RawMessage     `json:"spec,omitempty"`
	Listeners []DataplaneListener `json:"listeners,omitempty"`
	// StreamID is the stream that registered (upserted) or whose
	// deregistration deleted it; 0 for a delete with its mesh.
	StreamID int64  `json:"streamId"`
	Reason   string `json:"reason,omitempty"` // for deletes: "deregistered", "mesh deleted"
}

// Gap is an interval with no Dataplane in the store.
type Gap struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Duration is To - From.
func (g Gap) Duration() time.Duration { return g.To.Sub(g.From) }

// DataplaneGaps is the intervals within [from, to] when the Dataplane
// these events (oldest first, one Dataplane's) describe was absent.
func DataplaneGaps(events []DataplaneEvent, from, to time.Time) []Gap {
	present := false
	i := 0
	for ; i < len(events) && !events[i].At.After(from); i++ {
		present = events[i].Kind == DataplaneUpserted
	}
	var gaps []Gap
	start := from
	for ; i < len(events) && !events[i].At.After(to); i++ {
		e := events[i]
		switch {
		case e.Kind == DataplaneDeleted && present:
			present, start = false, e.At
		case e.Kind == DataplaneUpserted && !present:
			present = true
			if e.At.After(start) {
				gaps = append(gaps, Gap{From: start, To: e.At})
			}
		}
	}
	if !present && to.After(start) {
		gaps = append(gaps, Gap{From: start, To: to})
	}
	return gaps
}

// ZoneEgress is one zone egress listener kuma-cp hands the mesh's
// sidecars (xds.ZoneEgressInstance, without the SAN: no MeshIdentity here).
type ZoneEgress struct {
	Dataplane string `json:"dataplane"`
	Address   string `json:"address"`
	Port      uint32 `json:"port"`
}

// EgressSetEvent is a change of a mesh's zone egress set.
type EgressSetEvent struct {
	// At is when the store changed the set; EffectiveAt = At +
	// EgressPropagation is when the sidecars got it.
	At          time.Time    `json:"at"`
	EffectiveAt time.Time    `json:"effectiveAt"`
	Dataplane   string       `json:"dataplane"` // whose change it was
	Kind        string       `json:"kind"`      // DataplaneUpserted or DataplaneDeleted
	Egresses    []ZoneEgress `json:"egresses"`  // the set from then on
}

// NodeStreamInfo is the xDS stream state of one node id, as kuma-cp's
// DataplaneCallbacks and DataplaneLifecycle hold it.
type NodeStreamInfo struct {
	At     time.Time `json:"at"` // when this was taken
	NodeID string    `json:"nodeId"`
	// ActiveStream holds the node (0: none). It stays set while a closed
	// stream's deregistration runs: new streams are refused then.
	ActiveStream int64      `json:"activeStream"`
	ActiveSince  *time.Time `json:"activeSince,omitempty"`
	// Connected: registered and CacheExpiration slept, stream still open.
	Connected   bool       `json:"connected"`
	ConnectedAt *time.Time `json:"connectedAt,omitempty"` // of the current or last stream
	// DeregisteringSince is when the active stream closed, while the
	// deregistration delay runs; DeregistrationAt is when it ends.
	DeregisteringSince *time.Time `json:"deregisteringSince,omitempty"`
	DeregistrationAt   *time.Time `json:"deregistrationAt,omitempty"`
	// Refusals counts streams refused with "there is already an active
	// stream from this node, try again later".
	Refusals      int        `json:"refusals"`
	LastRefusalAt *time.Time `json:"lastRefusalAt,omitempty"`
	Accepted      int        `json:"accepted"` // streams that took the node
}

// nodeState is the lifecycle state of one node id (in memory, like
// kuma-cp's: a restart forgets all but the counters).
type nodeState struct {
	stream      int64
	activeSince time.Time
	connected   bool
	connectedAt time.Time
	deregSince  time.Time
	refusals    int
	lastRefusal time.Time
	accepted    int
}

func (s *Server) nodeLocked(nodeID string) *nodeState {
	n := s.nodes[nodeID]
	if n == nil {
		n = &nodeState{}
		s.nodes[nodeID] = n
	}
	return n
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// NodeStream reports the stream state of a node id ("mesh.name").
// A node id never seen has only At and NodeID set.
func (s *Server) NodeStream(nodeID string) NodeStreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := NodeStreamInfo{At: time.Now(), NodeID: nodeID}
	n := s.nodes[nodeID]
	if n == nil {
		return info
	}
	info.ActiveStream = n.stream
	info.Connected = n.connected
	info.ConnectedAt = timePtr(n.connectedAt)
	info.Refusals = n.refusals
	info.LastRefusalAt = timePtr(n.lastRefusal)
	info.Accepted = n.accepted
	if n.stream != 0 {
		info.ActiveSince = timePtr(n.activeSince)
	}
	if !n.deregSince.IsZero() {
		info.DeregisteringSince = timePtr(n.deregSince)
		info.DeregistrationAt = timePtr(n.deregSince.Add(s.timings.DeregistrationDelay))
	}
	return info
}

// dpKey is a Dataplane's mesh and name.
type dpKey struct{ mesh, name string }

type storedDataplane struct {
	rec DataplaneRecord
	dp  *dataplane // parsed, to authenticate a later upsert against
}

type storeEvent struct {
	key dpKey
	ev  DataplaneEvent
}

// maxStoreEvents bounds the timeline kept; older events are folded into
// base, so the state at any later time can still be replayed.
const maxStoreEvents = 100_000

// dpStore is the Dataplane store: what is in it now and every change.
type dpStore struct {
	current map[dpKey]*storedDataplane
	events  []storeEvent              // oldest first
	base    map[dpKey]*DataplaneEvent // the last event per key folded out of events
}

func newDPStore() dpStore {
	return dpStore{current: map[dpKey]*storedDataplane{}, base: map[dpKey]*DataplaneEvent{}}
}

func (st *dpStore) record(key dpKey, ev DataplaneEvent) {
	if len(st.events) == maxStoreEvents {
		old := st.events[0]
		st.base[old.key] = &old.ev
		st.events = st.events[1:]
	}
	st.events = append(st.events, storeEvent{key, ev})
}

// metaKeys lists the flat-format keys that are not the Dataplane spec.
var metaKeys = []string{"type", "mesh", "name", "labels", "creationTime", "modificationTime", "kri"}

// dataplaneSpecJSON is the spec part of a dataplane.resource (YAML or
// JSON, kuma's flat REST form).
func dataplaneSpecJSON(resource string) (json.RawMessage, error) {
	js, err := yaml.YAMLToJSON([]byte(resource))
	if err != nil {
		return nil, err
	}
	o, err := asObject(js)
	if err != nil {
		return nil, err
	}
	spec := map[string]json.RawMessage{}
	for k, v := range o {
		spec[k] = v
	}
	for _, k := range metaKeys {
		delete(spec, k)
	}
	return json.Marshal(spec)
}

func enumName(values map[string]int32, v int32) string {
	for name, n := range values {
		if n == v {
			return name
		}
	}
	return strconv.Itoa(int(v))
}

func listenerRecords(dp *dataplane) []DataplaneListener {
	out := []DataplaneListener{}
	if dp.Networking == nil {
		return out
	}
	for _, l := range dp.Networking.Listeners {
		out = append(out, DataplaneListener{
			Type:    enumName(listenerTypeValues, l.Type),
			Address: l.Address,
			Port:    l.Port,
			State:   enumName(listenerStateValues, l.State),
			Name:    l.Name,
		})
	}
	return out
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// errRegister wraps an upsert failure as DataplaneLifecycle.register does.
func errRegister(err error) error {
	return fmt.Errorf("could not register proxy passed in kuma-dp run: %w", err)
}

// upsertDataplane is DataplaneLifecycle.register's manager.Upsert: create
// (the mesh must exist) or update (the stream's credential must also be
// good for the Dataplane already stored).
func (s *Server) upsertDataplane(st *adsStream, id int64, dp *dataplane, spec json.RawMessage) error {
	key := dpKey{dp.Mesh, dp.Name}
	s.mu.Lock()
	existing := s.store.current[key]
	meshExists := s.meshes[dp.Mesh]
	s.mu.Unlock()
	if existing == nil && !meshExists {
		return errRegister(fmt.Errorf("mesh of name %s is not found", dp.Mesh))
	}
	if existing != nil && !s.opts.AuthDisabled {
		if err := s.checkCredential(st.ctx, existing.dp); err != nil {
			return errRegister(fmt.Errorf("you are trying to override existing proxy to which you don't have an access.: %w", err))
		}
	}
	now := time.Now()
	listeners := listenerRecords(dp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.orphaned() { // the CP process that took the stream is gone
		return errRestarted
	}
	cur := s.store.current[key]
	if cur == nil {
		cur = &storedDataplane{rec: DataplaneRecord{Mesh: dp.Mesh, Name: dp.Name, CreatedAt: now}}
		s.store.current[key] = cur
	}
	cur.dp = dp
	cur.rec.Labels = copyLabels(dp.Labels)
	cur.rec.Spec = spec
	cur.rec.Listeners = listeners
	cur.rec.UpdatedAt = now
	cur.rec.StreamID = id
	s.store.record(key, DataplaneEvent{At: now, Kind: DataplaneUpserted, Spec: spec, Listeners: listeners, StreamID: id})
	return nil
}

// deleteDataplaneLocked removes a Dataplane; false if it was not there.
func (s *Server) deleteDataplaneLocked(key dpKey, streamID int64, reason string) bool {
	if s.store.current[key] == nil {
		return false
	}
	delete(s.store.current, key)
	s.store.record(key, DataplaneEvent{At: time.Now(), Kind: DataplaneDeleted, StreamID: streamID, Reason: reason})
	return true
}

// deleteMeshDataplanesLocked removes every Dataplane of a deleted mesh.
func (s *Server) deleteMeshDataplanesLocked(mesh string) int {
	n := 0
	for _, key := range s.sortedKeysLocked(mesh) {
		if s.deleteDataplaneLocked(key, 0, "mesh deleted") {
			n++
		}
	}
	return n
}

func (s *Server) sortedKeysLocked(mesh string) []dpKey {
	var keys []dpKey
	for k := range s.store.current {
		if k.mesh == mesh {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].name < keys[j].name })
	return keys
}

func cloneRecord(r DataplaneRecord) DataplaneRecord {
	r.Labels = copyLabels(r.Labels)
	r.Spec = append(json.RawMessage(nil), r.Spec...)
	r.Listeners = append([]DataplaneListener{}, r.Listeners...)
	return r
}

// Dataplane reports the Dataplane mesh/name in the store now.
func (s *Server) Dataplane(mesh, name string) (DataplaneRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.store.current[dpKey{mesh, name}]
	if cur == nil {
		return DataplaneRecord{}, false
	}
	return cloneRecord(cur.rec), true
}

// Dataplanes lists the Dataplanes of a mesh in the store now, by name.
func (s *Server) Dataplanes(mesh string) []DataplaneRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []DataplaneRecord{}
	for _, k := range s.sortedKeysLocked(mesh) {
		out = append(out, cloneRecord(s.store.current[k].rec))
	}
	return out
}

// DataplaneTimeline is every store change of mesh/name, oldest first (the
// newest 100000 changes of the whole store are kept).
func (s *Server) DataplaneTimeline(mesh, name string) []DataplaneEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := dpKey{mesh, name}
	out := []DataplaneEvent{}
	for _, e := range s.store.events {
		if e.key == key {
			out = append(out, e.ev)
		}
	}
	return out
}

// egressSet is resolveZoneEgresses over one mesh's Dataplanes (name ->
// their last upsert): every listener of type ZoneEgress whose state is
// Ready, Dataplanes by name. Online status is not looked at.
func egressSet(present map[string]*DataplaneEvent) []ZoneEgress {
	names := make([]string, 0, len(present))
	for n := range present {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []ZoneEgress{}
	for _, n := range names {
		for _, l := range present[n].Listeners {
			if l.Type == "ZoneEgress" && l.State == "Ready" {
				out = append(out, ZoneEgress{Dataplane: n, Address: l.Address, Port: l.Port})
			}
		}
	}
	return out
}

func applyEvent(present map[string]*DataplaneEvent, name string, ev *DataplaneEvent) {
	if ev.Kind == DataplaneUpserted {
		present[name] = ev
	} else {
		delete(present, name)
	}
}

// meshStateLocked replays a mesh's Dataplanes up to and including t (all
// of them when t is zero).
func (s *Server) meshStateLocked(mesh string, t time.Time) map[string]*DataplaneEvent {
	present := map[string]*DataplaneEvent{}
	for k, ev := range s.store.base {
		if k.mesh == mesh {
			applyEvent(present, k.name, ev)
		}
	}
	for i := range s.store.events {
		e := &s.store.events[i]
		if !t.IsZero() && e.ev.At.After(t) {
			break
		}
		if e.key.mesh == mesh {
			applyEvent(present, e.key.name, &e.ev)
		}
	}
	return present
}

// ZoneEgresses is the zone egress set kuma-cp hands the mesh's sidecars
// now: resolveZoneEgresses over the store as it was EgressPropagation ago.
func (s *Server) ZoneEgresses(mesh string) []ZoneEgress {
	return s.ZoneEgressesAt(mesh, time.Now())
}

// ZoneEgressesAt is ZoneEgresses as it was (or will be, with no further
// change) at t.
func (s *Server) ZoneEgressesAt(mesh string, t time.Time) []ZoneEgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return egressSet(s.meshStateLocked(mesh, t.Add(-s.timings.EgressPropagation)))
}

// StoredZoneEgresses is resolveZoneEgresses over the store now, before
// the propagation lag.
func (s *Server) StoredZoneEgresses(mesh string) []ZoneEgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return egressSet(s.meshStateLocked(mesh, time.Time{}))
}

// ZoneEgressTimeline lists each change of the mesh's zone egress set,
// oldest first: when the store changed it and when the sidecars got it.
func (s *Server) ZoneEgressTimeline(mesh string) []EgressSetEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	present := map[string]*DataplaneEvent{}
	for k, ev := range s.store.base {
		if k.mesh == mesh {
			applyEvent(present, k.name, ev)
		}
	}
	prev := egressSet(present)
	out := []EgressSetEvent{}
	for i := range s.store.events {
		e := &s.store.events[i]
		if e.key.mesh != mesh {
			continue
		}
		applyEvent(present, e.key.name, &e.ev)
		cur := egressSet(present)
		if equalEgresses(prev, cur) {
			continue
		}
		out = append(out, EgressSetEvent{
			At:          e.ev.At,
			EffectiveAt: e.ev.At.Add(s.timings.EgressPropagation),
			Dataplane:   e.key.name,
			Kind:        e.ev.Kind,
			Egresses:    cur,
		})
		prev = cur
	}
	return out
}

func equalEgresses(a, b []ZoneEgress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var errRestarted = errors.New("control plane restarted")
