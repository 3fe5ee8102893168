package relay

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// withAgentMetadata is replay with Options.AgentMetadata applied to the
// node of its first request that has one; replay itself when there is
// none, or it cannot be read (it is then forwarded as it is).
func (r *Relay) withAgentMetadata(kind streamKind, replay [][]byte) [][]byte {
	if r.opts.AgentMetadata == nil {
		return replay
	}
	for i, b := range replay {
		patched, ok := patchNode(kind, b, func(md *structpb.Struct) { r.opts.AgentMetadata(md, kind.incremental()) })
		if !ok {
			continue
		}
		out := slices.Clone(replay)
		out[i] = patched
		return out
	}
	return replay
}

// patchNode applies patch to the node of an ADS request b, if it has one.
func patchNode(kind streamKind, b []byte, patch func(*structpb.Struct)) ([]byte, bool) {
	var msg interface {
		proto.Message
		GetNode() *corev3.Node
	}
	switch kind.(type) {
	case delta:
		msg = &discoveryv3.DeltaDiscoveryRequest{}
	case sotw:
		msg = &discoveryv3.DiscoveryRequest{}
	default:
		return nil, false
	}
	if err := proto.Unmarshal(b, msg); err != nil || msg.GetNode() == nil {
		return nil, false
	}
	node := msg.GetNode()
	if node.Metadata == nil {
		node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	patch(node.Metadata)
	out, err := proto.Marshal(msg)
	if err != nil {
		return nil, false
	}
	return out, true
}
