package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
)

// withAgentBuild is doc with the agent build of the control plane's
// release line in Envoy's node, as the relay puts it on every stream: in
// direct mode Envoy's node is what kuma-cp judges, and the bootstrap
// request, sent before the release is known, named the newest (which a
// 2.14 control plane flags as incompatible). The bootstrap's ADS kind
// tells the release. A doc it cannot read is left as it came: the version
// is a label, never a reason not to start.
func withAgentBuild(doc []byte, set func(md *structpb.Struct, deltaADS bool)) []byte {
	if set == nil {
		return doc
	}
	o, err := bootstrapdoc.Parse(doc)
	if err != nil {
		return doc
	}
	node := &corev3.Node{}
	if ok, err := o.Decode("node", node); !ok || err != nil {
		return doc
	}
	if node.Metadata == nil {
		node.Metadata = &structpb.Struct{}
	}
	delta, _ := adsIsDelta(o) // none, or unreadable: state of the world
	set(node.Metadata, delta)
	if o.SetProto("node", node) != nil {
		return doc
	}
	return o.JSON()
}
