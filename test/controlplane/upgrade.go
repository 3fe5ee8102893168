package controlplane

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sotwUnimplemented is how gRPC refuses a method the server does not
// register: kuma-cp 3.0 serves delta ADS only (kumahq/kuma#17040).
var sotwUnimplemented = status.Error(codes.Unimplemented,
	"unknown method StreamAggregatedResources for service envoy.service.discovery.v3.AggregatedDiscoveryService")

// Upgrade replaces this control plane by the release kuma (Kuma30 or
// Kuma214) as an operator does across a kuma-cp upgrade or rollback: every
// connection drops, the DP server stays down for `down`, and comes back on
// the same address, with the same CA, certificate and token signing key,
// and that release's bootstrap (its ADS api_type), protocols and GET
// /version. The Dataplane store is rebuilt, as a kuma-cp with the memory
// store restarts empty: every Dataplane is deleted (reason "control plane
// upgraded") and registered anew by its proxy's next accepted stream.
// Meshes are kept (an operator applies them again before the proxies
// matter). It returns once the listener is back.
func (s *Server) Upgrade(kuma string, down time.Duration) error {
	next, err := resolveKuma(kuma)
	if err != nil {
		return err
	}
	from := s.KumaVersion()
	err = s.restart(down, func() {
		s.mu.Lock()
		n := 0
		for key := range s.store.current {
			if s.deleteDataplaneLocked(key, 0, "control plane upgraded") {
				n++
			}
		}
		s.kuma.Store(&next)
		s.mu.Unlock()
		s.log.printf("kuma-cp %s replaced by %s: %d Dataplanes gone with the store", from, s.KumaVersion(), n)
	})
	return err
}
