package main

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func redactedAny(m proto.Message) *anypb.Any { return mustAny(redact(m)) }

func endpointAddrs(la *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, ep := range la.GetEndpoints() {
		for _, lb := range ep.GetLbEndpoints() {
			if a, err := envoyAddr(lb.GetEndpoint().GetAddress()); err == nil {
				out = append(out, a)
			} else if sa := lb.GetEndpoint().GetAddress().GetSocketAddress(); sa != nil {
				out = append(out, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
			}
		}
	}
	return out
}

func clusterLoadAssignment(s *server, m proto.Message) *endpointv3.ClusterLoadAssignment {
	c := m.(*clusterv3.Cluster)
	if c.GetType() != clusterv3.Cluster_EDS {
		return c.GetLoadAssignment()
	}
	name := c.GetEdsClusterConfig().GetServiceName()
	if name == "" {
		name = c.GetName()
	}
	if r, ok := s.res[typeEndpoint][name]; ok {
		return r.msg.(*endpointv3.ClusterLoadAssignment)
	}
	return nil
}

// buildConfigDump assembles the tracker sections in Envoy's (alphabetical)
// order, with sensitive fields redacted.
func (s *server) buildConfigDump(includeEDS bool) *adminv3.ConfigDump {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evalInit()
	start := timestamppb.New(s.start)
	dump := &adminv3.ConfigDump{}
	dump.Configs = append(dump.Configs, mustAny(&adminv3.BootstrapConfigDump{Bootstrap: redact(s.boot).(*bootstrapv3.Bootstrap), LastUpdated: start}))

	cd := &adminv3.ClustersConfigDump{VersionInfo: s.versionInfo[typeCluster]}
	for _, c := range s.staticClusters {
		cd.StaticClusters = append(cd.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{Cluster: redactedAny(c), LastUpdated: start})
	}
	for _, n := range s.resourceNames(typeCluster) {
		r := s.res[typeCluster][n]
		dc := &adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: r.version, Cluster: redactedAny(r.msg), LastUpdated: timestamppb.New(r.updated)}
		if r.afterInit && !s.clusterWarm(r.msg.(*clusterv3.Cluster)) {
			cd.DynamicWarmingClusters = append(cd.DynamicWarmingClusters, dc)
		} else {
			cd.DynamicActiveClusters = append(cd.DynamicActiveClusters, dc)
		}
	}
	dump.Configs = append(dump.Configs, mustAny(cd))

	if includeEDS {
		ed := &adminv3.EndpointsConfigDump{}
		for _, c := range s.staticClusters {
			if la := c.GetLoadAssignment(); la != nil {
				ed.StaticEndpointConfigs = append(ed.StaticEndpointConfigs, &adminv3.EndpointsConfigDump_StaticEndpointConfig{EndpointConfig: redactedAny(la), LastUpdated: start})
			}
		}
		for _, n := range s.resourceNames(typeEndpoint) {
			r := s.res[typeEndpoint][n]
			ed.DynamicEndpointConfigs = append(ed.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: r.version, EndpointConfig: redactedAny(r.msg), LastUpdated: timestamppb.New(r.updated)})
		}
		dump.Configs = append(dump.Configs, mustAny(ed))
	}

	ld := &adminv3.ListenersConfigDump{VersionInfo: s.versionInfo[typeListener]}
	names := map[string]bool{}
	for n := range s.listeners {
		names[n] = true
	}
	for n := range s.listenerErrors {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		l, ok := s.listeners[n]
		if ok && l.static {
			ld.StaticListeners = append(ld.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{Listener: redactedAny(l.cfg), LastUpdated: start})
			continue
		}
		dl := &adminv3.ListenersConfigDump_DynamicListener{Name: n, ErrorState: s.listenerErrors[n]}
		if ok {
			st := &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: l.version, Listener: redactedAny(l.cfg), LastUpdated: timestamppb.New(l.updated)}
			if l.afterInit && !s.resourceWarm(listenerDeps(l.cfg)) {
				dl.WarmingState = st
				// The version it replaces stays active until it is warm.
				if cur := l.live.Load(); cur != nil && cur != l && cur.started {
					dl.ActiveState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: cur.version, Listener: redactedAny(cur.cfg), LastUpdated: timestamppb.New(cur.updated)}
				}
			} else {
				dl.ActiveState = st
			}
		}
		ld.DynamicListeners = append(ld.DynamicListeners, dl)
	}
	dump.Configs = append(dump.Configs, mustAny(ld))

	rd := &adminv3.RoutesConfigDump{}
	for _, n := range s.resourceNames(typeRoute) {
		r := s.res[typeRoute][n]
		rd.DynamicRouteConfigs = append(rd.DynamicRouteConfigs, &adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: r.version, RouteConfig: redactedAny(r.msg), LastUpdated: timestamppb.New(r.updated)})
	}
	dump.Configs = append(dump.Configs, mustAny(rd))
	dump.Configs = append(dump.Configs, mustAny(&adminv3.ScopedRoutesConfigDump{}))

	sd := &adminv3.SecretsConfigDump{}
	staticNames := make([]string, 0, len(s.staticSecrets))
	for n := range s.staticSecrets {
		staticNames = append(staticNames, n)
	}
	sort.Strings(staticNames)
	for _, n := range staticNames {
		sd.StaticSecrets = append(sd.StaticSecrets, &adminv3.SecretsConfigDump_StaticSecret{Name: n, LastUpdated: start, Secret: redactedAny(s.staticSecrets[n])})
	}
	for _, n := range s.resourceNames(typeSecret) {
		r := s.res[typeSecret][n]
		sd.DynamicActiveSecrets = append(sd.DynamicActiveSecrets, &adminv3.SecretsConfigDump_DynamicSecret{Name: n, VersionInfo: r.version, LastUpdated: timestamppb.New(r.updated), Secret: redactedAny(r.msg)})
	}
	for k, d := range s.deps {
		if k.typ == typeSecret && d.ads {
			if _, ok := s.res[typeSecret][k.name]; !ok {
				sd.DynamicWarmingSecrets = append(sd.DynamicWarmingSecrets, &adminv3.SecretsConfigDump_DynamicSecret{Name: k.name})
			}
		}
	}
	sort.Slice(sd.DynamicWarmingSecrets, func(i, j int) bool { return sd.DynamicWarmingSecrets[i].Name < sd.DynamicWarmingSecrets[j].Name })
	dump.Configs = append(dump.Configs, mustAny(sd))
	return dump
}

func (as *adminServer) configDump(_ *http.Request, q url.Values) adminResponse {
	_, eds := q["include_eds"]
	dump := as.s.buildConfigDump(eds)
	res := q.Get("resource")
	if res == "" {
		return jsonResp(200, marshalJSON(dump, false))
	}
	// ?resource= lists the elements of that repeated field of each section.
	out := &adminv3.ConfigDump{}
	found := false
	for _, a := range dump.Configs {
		m, err := a.UnmarshalNew()
		if err != nil {
			continue
		}
		fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(res))
		if fd == nil || !fd.IsList() || fd.Message() == nil {
			continue
		}
		found = true
		l := m.ProtoReflect().Get(fd).List()
		for i := 0; i < l.Len(); i++ {
			out.Configs = append(out.Configs, mustAny(l.Get(i).Message().Interface()))
		}
	}
	if !found {
		return text(http.StatusNotFound, fmt.Sprintf("%s not found in config dump", res))
	}
	return jsonResp(200, marshalJSON(out, false))
}
