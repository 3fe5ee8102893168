package lkgcache

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

const (
	clusterType   = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	endpointsType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// servicesSnapshot is a zone ingress's configuration for n services: per
// service an EDS cluster, its endpoints and a filter chain of the
// listener, at about the sizes kuma-cp sends.
func servicesSnapshot(n int) *Snapshot {
	clusters := TypeState{TypeURL: clusterType, Version: "c1"}
	endpoints := TypeState{TypeURL: endpointsType, Version: "e1"}
	var listener []byte
	for i := range n {
		name := fmt.Sprintf("backend-%d_default_svc_8080", i)
		clusters.Resources = append(clusters.Resources, Resource{Name: name, Version: "1", TypeURL: clusterType,
			Body: append([]byte(name), bytes.Repeat([]byte{1}, 220)...)})
		endpoints.Resources = append(endpoints.Resources, Resource{Name: name, Version: "1", TypeURL: endpointsType,
			Body: append([]byte(name), bytes.Repeat([]byte{2}, 250)...)})
		listener = append(append(listener, name...), bytes.Repeat([]byte{3}, 140)...)
	}
	listeners := TypeState{TypeURL: listenerType, Version: "l1", Resources: []Resource{
		{Name: "zone-ingress", Version: "1", TypeURL: listenerType, Body: listener}}}
	return &Snapshot{Identity: testID, WrittenAt: time.Unix(1900000000, 0), Bootstrap: bytes.Repeat([]byte("b"), 2000),
		Types: []TypeState{clusters, endpoints, listeners}}
}

// BenchmarkWrite1000Services is the writer's encoding of a 1,000-service
// configuration (the disk left out).
func BenchmarkWrite1000Services(b *testing.B) {
	s := servicesSnapshot(1000)
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		n := &countingWriter{}
		if err := encodeTo(n, s); err != nil {
			b.Fatal(err)
		}
		size = n.n
	}
	b.ReportMetric(float64(size), "file-bytes")
}

// BenchmarkRead1000Services is the load of that file at start.
func BenchmarkRead1000Services(b *testing.B) {
	data := Encode(servicesSnapshot(1000))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data)), "file-bytes")
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
