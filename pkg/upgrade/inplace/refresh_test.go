package inplace

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// After a reload, the adopted Envoy is handed over when this program
// would start another (another build, launch); not when it would start
// the same, nor when the control plane's bootstrap cannot be compared.
func TestAfterAReloadTheAdoptedEnvoyIsReplacedOnlyWhenItDiffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		build     string            // --envoy-binary's now
		launch    map[string]string // the running Envoy's
		refetch   func(context.Context, envoy.Version) ([]byte, error)
		wantWhy   string // "" for no handover
		wantNewGo bool
	}{
		{name: "the same", build: "old-build"},
		{name: "another build", build: "new-build", wantWhy: "another Envoy build (old-build -> new-build)", wantNewGo: true},
		{name: "another launch", build: "old-build", launch: map[string]string{string(config.KeyConcurrency): "1"},
			wantWhy: "the configuration changes Envoy's launch (--concurrency)", wantNewGo: true},
		{name: "the control plane cannot be asked", build: "old-build",
			refetch: func(context.Context, envoy.Version) ([]byte, error) { return nil, errors.New("unreachable") }},
		{name: "the control plane's bootstrap unreadable", build: "old-build",
			refetch: func(context.Context, envoy.Version) ([]byte, error) { return []byte("{not json"), nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHandoverRig(t, false)
			r.serving.Store(true)
			r.envoy.build = tc.build
			r.relay.resume = &xds.Resumption{}
			if tc.launch != nil {
				r.launched(tc.launch)
			}
			if tc.refetch != nil {
				r.KeepRefetch(tc.refetch)
			}
			reasons, doc, err := r.adoptedEnvoyChanges(context.Background())
			if err != nil || doc != nil || strings.Join(reasons, "; ") != tc.wantWhy {
				t.Fatalf("reasons %q, bootstrap %q, %v; want %q", reasons, doc, err, tc.wantWhy)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r.RefreshAdopted(ctx)
			if got := len(r.envoy.started) == 1; got != tc.wantNewGo {
				t.Fatalf("a new Envoy took over: %v, want %v", got, tc.wantNewGo)
			}
			if tc.wantNewGo && r.Serving().Generation != 2 {
				t.Errorf("the new Envoy serves as generation %d", r.Serving().Generation)
			}
			r.EndRetirements()
		})
	}
}
