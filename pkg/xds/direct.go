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
	set(node.Metadata, adsIsDelta(o))
	if o.SetProto("node", node) != nil {
		return doc
	}
	return o.JSON()
}

// adsIsDelta: the bootstrap asks for delta ADS (kuma-cp 3.0); a missing
// or unreadable ADS section reads as state of the world.
func adsIsDelta(o *bootstrapdoc.Object) bool {
	dyn := o.Object("dynamic_resources")
	if dyn == nil {
		return false
	}
	ads := &corev3.ApiConfigSource{}
	if ok, err := dyn.DecodeKnown("ads_config", ads); !ok || err != nil {
		return false
	}
	t := ads.GetApiType()
	return t == corev3.ApiConfigSource_DELTA_GRPC || t == corev3.ApiConfigSource_AGGREGATED_DELTA_GRPC
}
