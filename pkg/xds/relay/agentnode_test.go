package relay

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The control plane reads what it shows of the agent from the node of a
// stream's first request: the relay puts the running agent there, as
// after a reload the running Envoy's node still names the old one. The
// rest of the node, and of the stream, is Envoy's.
func TestTheControlPlaneSeesTheRunningAgentInTheNode(t *testing.T) {
	p := newPKI(t)
	cp := startScriptedCP(t, p)
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil, func(o *Options) {
		o.AgentMetadata = func(md *structpb.Struct, _ bool) { md.Fields["agent"] = structpb.NewStringValue("running") }
	})
	envoy := dialEnvoy(t, r, deltaMethod)
	md, err := structpb.NewStruct(map[string]any{"agent": "the one that started Envoy", "workdir": "/run/zoneproxy/zp"})
	if err != nil {
		t.Fatal(err)
	}
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: node.Id, Cluster: node.Cluster, Metadata: md}, TypeUrl: clusterType})
	first := cp.nextRequest(t)
	got := first.GetNode()
	if got.GetId() != node.Id || first.GetTypeUrl() != clusterType {
		t.Fatalf("the control plane got %v", first)
	}
	if a := got.GetMetadata().GetFields()["agent"].GetStringValue(); a != "running" {
		t.Errorf("the node names the agent %q, want the running one", a)
	}
	if w := got.GetMetadata().GetFields()["workdir"].GetStringValue(); w != "/run/zoneproxy/zp" {
		t.Errorf("the rest of the node's metadata changed: %v", got.GetMetadata())
	}
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType})
	if next := cp.nextRequest(t); next.GetNode() != nil || next.GetTypeUrl() != listenerType {
		t.Errorf("a later request %v, want Envoy's as it sent it", next)
	}
}

// What the agent reports depends on the stream's protocol: kuma-cp 2.14
// serves state of the world, 3.0 delta, and each judges the reported
// version against its own release.
func TestTheAgentMetadataKnowsTheStreamsProtocol(t *testing.T) {
	for _, tc := range []struct {
		kind  streamKind
		first []byte
		delta bool
	}{
		{kind: sotw{}, first: mustMarshal(t, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType}), delta: false},
		{kind: delta{}, first: mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType}), delta: true},
	} {
		var told []bool
		r := &Relay{opts: Options{AgentMetadata: func(_ *structpb.Struct, delta bool) { told = append(told, delta) }}}
		r.withAgentMetadata(tc.kind, [][]byte{tc.first})
		if len(told) != 1 || told[0] != tc.delta {
			t.Errorf("%s stream: the agent metadata was told delta %v, want [%v]", tc.kind.name(), told, tc.delta)
		}
	}
}
