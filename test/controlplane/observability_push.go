package controlplane

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// buildInput is what a connected proxy's snapshot is built from.
type buildInput struct {
	dp   *dataplane
	node *corev3.Node
}

// setSnapshotFor builds the proxy's xDS with its current policies and
// hands it to the cache, which pushes the difference on its stream. At
// connect a failed build clears the snapshot (the proxy gets no config,
// as with kuma-cp); on a later change the previous config stays.
func (s *Server) setSnapshotFor(nodeID string, dp *dataplane, node *corev3.Node, atConnect bool) {
	st := s.obsState()
	st.build.Lock()
	defer st.build.Unlock()
	st.mu.Lock()
	if st.inputs == nil {
		st.inputs = map[string]buildInput{}
	}
	st.inputs[nodeID] = buildInput{dp: dp, node: node}
	pol := st.policies[nodeID].clone()
	st.mu.Unlock()

	snap, err := buildSnapshot(dp, node, pol, s.opts.Services, s.Kuma(), s.backendPortSection(dp.Mesh))
	if err != nil {
		if atConnect {
			s.xdsCache.ClearSnapshot(nodeID)
		}
		s.log.printf("ads: could not generate xDS for node=%s: %v", nodeID, err)
		return
	}
	if s.opts.PadClusterBytes > 0 {
		padClusters(snap, s.opts.PadClusterBytes)
	}
	if s.Kuma() == Kuma214 {
		s.unversionEmptyTypes(nodeID, snap, atConnect)
	}
	if err := s.xdsCache.SetSnapshot(s.ctx, nodeID, snap); err != nil {
		s.log.printf("ads: could not set snapshot for node=%s: %v", nodeID, err)
		return
	}
	if !atConnect {
		s.log.printf("ads: snapshot %s set for node=%s", snap.GetVersion(resourcev3.ListenerType), nodeID)
	}
}

// pushSnapshot rebuilds the snapshot of a proxy that connected before;
// one that never connected gets its policies when it does.
func (s *Server) pushSnapshot(nodeID string) {
	st := s.obsState()
	st.mu.Lock()
	in, ok := st.inputs[nodeID]
	st.mu.Unlock()
	if !ok {
		return
	}
	s.setSnapshotFor(nodeID, in.dp, in.node, false)
}
