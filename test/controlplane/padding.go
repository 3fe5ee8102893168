package controlplane

import (
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// padClusters adds a cluster of about n bytes to snap's clusters
// (Options.PadClusterBytes).
func padClusters(snap *cachev3.Snapshot, n int) {
	md, _ := structpb.NewStruct(map[string]any{"padding": strings.Repeat("x", n)})
	c := &clusterv3.Cluster{Name: "padding", Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"padding": md}}}
	res := &snap.Resources[cachev3.GetResponseType(resourcev3.ClusterType)]
	res.Items["padding"] = types.ResourceWithTTL{Resource: c}
}
