package controlplane

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
)

// Features of a bootstrap request that change what kuma-cp 2.14 renders
// (pkg/core/xds/types/features.go at v2.14.3).
const (
	featureDeltaGRPC             = "feature-delta-grpc"
	featureUnifiedResourceNaming = "feature-unified-resource-naming"
	// kuma-cp 2.14's names for the ADS and access log clusters without
	// unified naming (pkg/xds/envoy/names GetAdsClusterName,
	// GetAccessLogSinkClusterName).
	legacyADSCluster           = "ads_cluster"
	legacyAccessLogSinkCluster = "access_log_sink"
)

func (p bootstrapParams) hasFeature(f string) bool { return slices.Contains(p.req.Features, f) }

// adsAPIType: kuma-cp 3.0 renders DELTA_GRPC always; 2.14.3 renders GRPC
// (SotW) unless the request advertises feature-delta-grpc
// (template_v3.go genConfig).
func (p bootstrapParams) adsAPIType() corev3.ApiConfigSource_ApiType {
	if p.kuma == Kuma214 && !p.hasFeature(featureDeltaGRPC) {
		return corev3.ApiConfigSource_GRPC
	}
	return corev3.ApiConfigSource_DELTA_GRPC
}

// systemClusterNames are the ADS and access log sink clusters' names.
// kuma-cp 2.14.3 gives the system_ names only to a proxy that advertises
// feature-unified-resource-naming in a mesh whose meshServices mode is
// Exclusive (system_names.GetNameOrDefault); meshes here are taken to be
// Exclusive, which mesh-scoped zone proxies need on 2.14.
func (p bootstrapParams) systemClusterNames() (ads, accessLogSink string) {
	if p.kuma == Kuma214 && !p.hasFeature(featureUnifiedResourceNaming) {
		return legacyADSCluster, legacyAccessLogSinkCluster
	}
	return adsClusterName, accessLogSinkCluster
}

// statsTags are kuma-cp's; 2.14.3 also tags Kafka stats (3.0 dropped it).
func (p bootstrapParams) statsTags() []*metricsv3.TagSpecifier {
	tag := func(name, regex string) *metricsv3.TagSpecifier {
		return &metricsv3.TagSpecifier{TagName: name, TagValue: &metricsv3.TagSpecifier_Regex{Regex: regex}}
	}
	tags := []*metricsv3.TagSpecifier{
		tag("name", `^grpc\.((.+)\.)`),
		tag("status", `^grpc.*streams_closed(_([0-9]+))`),
	}
	if p.kuma == Kuma214 {
		tags = append(tags,
			tag("kafka_name", `^kafka(\.(\S*[0-9]))\.`),
			tag("kafka_type", `^kafka\..*\.(.*?(?=_duration|$))`),
		)
	}
	return append(tags,
		tag("worker", `(worker_([0-9]+)\.)`),
		tag("listener", `((.+?)\.)rbac\.`),
	)
}
