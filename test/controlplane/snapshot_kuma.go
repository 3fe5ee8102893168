package controlplane

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// unversionEmptyTypes gives a type that has had no resources since the
// node connected the empty version, as kuma-cp 2.14.3's reconciler does
// (pkg/xds/server/v3/reconcile.go autoVersion: a type equal to the
// previous snapshot's keeps its version, and the first snapshot after a
// connect is compared with an empty one, version ""). A SotW request
// carries version "" until it is answered, so go-control-plane never
// answers that type: an ingress whose mesh has no MeshService gets no LDS
// at all, where delta (3.0) answers its first wildcard request with an
// empty LDS. Once a type had resources, emptying it is a new version.
func (s *Server) unversionEmptyTypes(nodeID string, snap *cachev3.Snapshot, atConnect bool) {
	var prev cachev3.ResourceSnapshot
	if !atConnect {
		prev, _ = s.xdsCache.GetSnapshot(nodeID)
	}
	for _, typ := range []resourcev3.Type{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.EndpointType} {
		if len(snap.GetResources(typ)) > 0 {
			continue
		}
		if prev == nil || prev.GetVersion(typ) == "" {
			snap.Resources[cachev3.GetResponseType(typ)] = cachev3.NewResources("", []types.Resource{})
		}
	}
}
