package controlplane_test

import (
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// test/harness runs zones with kuma-cp's lifecycle a fifth as long, its
// ratios kept, unless a test sets the timings.
func TestHarnessZonesRunKumaCPsLifecycleAFifthAsLong(t *testing.T) {
	if want := (controlplane.Timings{DeregistrationDelay: 2 * time.Second, CacheExpiration: 200 * time.Millisecond, EgressPropagation: 600 * time.Millisecond}); harness.FastLifecycle != want {
		t.Errorf("FastLifecycle %+v, want %+v", harness.FastLifecycle, want)
	}
	rows := []struct {
		name string
		opts controlplane.Options
		want controlplane.Timings
	}{
		{"left zero", controlplane.Options{}, harness.FastLifecycle},
		{"kuma-cp's real timings, set explicitly", controlplane.Options{
			DeregistrationDelay: controlplane.DefaultDeregistrationDelay,
			CacheExpiration:     controlplane.DefaultCacheExpiration,
			EgressPropagation:   controlplane.DefaultEgressPropagation,
		}, controlplane.Timings{DeregistrationDelay: 10 * time.Second, CacheExpiration: time.Second, EgressPropagation: 3 * time.Second}},
		{"one set, none for another", controlplane.Options{DeregistrationDelay: time.Second, CacheExpiration: -1},
			controlplane.Timings{DeregistrationDelay: time.Second, EgressPropagation: harness.FastLifecycle.EgressPropagation}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.opts.Meshes = []string{"payments"}
			if got := harness.NewZoneWith(t, harness.Binaries{}, r.opts).CP.Timings(); got != r.want {
				t.Errorf("timings %+v, want %+v", got, r.want)
			}
		})
	}
}
