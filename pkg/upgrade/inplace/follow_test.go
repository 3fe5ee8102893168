package inplace

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	zptest "github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// kumaCPBootstrap is kuma-cp's bootstrap with ADS of apiType (GRPC: 2.14,
// DELTA_GRPC: 3.0) to host, trusting ca.
func kumaCPBootstrap(ca []byte, apiType, host string) []byte {
	return []byte(`
admin:
  address: {pipe: {path: /run/zp/kuma-envoy-admin.sock}}
node: {id: default.zp, cluster: zp}
dynamicResources:
  adsConfig:
    apiType: ` + apiType + `
    transportApiVersion: V3
    grpcServices:
    - envoyGrpc: {clusterName: ads_cluster}
staticResources:
  clusters:
  - name: ads_cluster
    type: STRICT_DNS
    connectTimeout: 1s
    loadAssignment:
      clusterName: ads_cluster
      endpoints: [{lbEndpoints: [{endpoint: {address: {socketAddress: {address: ` + host + `, portValue: 5678}}}}]}]
    transportSocket:
      name: envoy.transport_sockets.tls
      typedConfig:
        '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: ` + host + `
        commonTlsContext:
          validationContext:
            trustedCa: {inlineString: "` + strings.ReplaceAll(string(ca), "\n", `\n`) + `"}
`)
}

// newFollowRig is a handover rig whose Envoy runs on kuma-cp's bootstrap
// of ADS type running, to cp.example, and whose control plane answers a
// bootstrap request with offer's (nil: the request fails); asked counts
// the requests.
func newFollowRig(t *testing.T, direct bool, running string, offer func(ca []byte) []byte) (*handoverRig, *atomic.Int32) {
	ca := zptest.CertPEM(t, time.Now().Add(time.Hour))
	r := newHandoverRig(t, direct)
	doc, up, err := xds.Rewrite(kumaCPBootstrap(ca, running, "cp.example"), r.kit.Load().Socket)
	if err != nil {
		t.Fatal(err)
	}
	r.kit.Load().Launch.Bootstrap = doc
	r.relay.resume = &xds.Resumption{Upstream: up}
	asked := new(atomic.Int32)
	r.KeepRefetch(func(context.Context, envoy.Version) ([]byte, error) {
		asked.Add(1)
		if doc := offer(ca); doc != nil {
			return doc, nil
		}
		return nil, errors.New("connection refused")
	})
	return r, asked
}

// offers is kuma-cp's bootstrap of ADS type apiType to host; "" for a
// request that fails.
func offers(apiType, host string) func(ca []byte) []byte {
	return func(ca []byte) []byte {
		if apiType == "" {
			return nil
		}
		return kumaCPBootstrap(ca, apiType, host)
	}
}

// Across kuma-cp's upgrade the agent hands over to an Envoy of the
// control plane's ADS protocol only when its bootstrap asks for another
// one, from the same control plane, while a live Envoy serves undrained;
// everything else leaves the running Envoy serving, and says why.
func TestTheControlPlanesProtocolIsFollowedOnlyWhenItChanged(t *testing.T) {
	defer func(d time.Duration) { handoverLiveTimeout = d }(handoverLiveTimeout)
	handoverLiveTimeout = 5 * time.Second
	for _, tc := range []struct {
		name       string
		running    string                 // apiType of the running Envoy
		offered    func(ca []byte) []byte // kuma-cp's bootstrap now
		notServing bool
		drained    bool
		direct     bool
		newExits   bool
		wantAsked  bool
		wantState  string // ProtocolChange's; "" for none
		wantCount  string // "to/result" counted
	}{
		{name: "2.14 to 3.0: delta", running: "GRPC", offered: offers("DELTA_GRPC", "cp.example"),
			wantAsked: true, wantState: Done, wantCount: "delta/success"},
		{name: "3.0 back to 2.14: state of the world", running: "DELTA_GRPC", offered: offers("GRPC", "cp.example"),
			wantAsked: true, wantState: Done, wantCount: "state-of-the-world/success"},
		{name: "the same protocol", running: "GRPC", offered: offers("GRPC", "cp.example"), wantAsked: true},
		{name: "the bootstrap request fails", running: "GRPC", offered: offers("", ""), wantAsked: true},
		{name: "the bootstrap points elsewhere", running: "GRPC", offered: offers("DELTA_GRPC", "other.example"), wantAsked: true},
		{name: "the new Envoy exits", running: "GRPC", offered: offers("DELTA_GRPC", "cp.example"), newExits: true,
			wantAsked: true, wantState: Failed, wantCount: "delta/failed"},
		{name: "not serving yet", running: "GRPC", offered: offers("DELTA_GRPC", "cp.example"), notServing: true},
		{name: "drained for maintenance", running: "GRPC", offered: offers("DELTA_GRPC", "cp.example"), drained: true},
		{name: "direct mode", running: "GRPC", offered: offers("DELTA_GRPC", "cp.example"), direct: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, asked := newFollowRig(t, tc.direct, tc.running, tc.offered)
			r.serving.Store(!tc.notServing)
			r.drained.Store(tc.drained)
			r.envoy.exits = tc.newExits
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			r.FollowControlPlane(ctx, "test", true)

			if got := asked.Load() == 1; got != tc.wantAsked {
				t.Fatalf("asked kuma-cp for its bootstrap: %v, want %v", got, tc.wantAsked)
			}
			pc := r.ProtocolChange()
			switch {
			case tc.wantState == "" && pc != nil:
				t.Fatalf("a protocol change %+v, want none", pc)
			case tc.wantState != "" && (pc == nil || pc.State != tc.wantState):
				t.Fatalf("protocol change %+v, want %s", pc, tc.wantState)
			}
			wantStarted := 0
			if tc.wantState != "" {
				wantStarted = 1
			}
			if len(r.envoy.started) != wantStarted {
				t.Fatalf("started %d new Envoys, want %d", len(r.envoy.started), wantStarted)
			}
			if tc.wantState == Done {
				delta, err := xds.ADSIsDelta([]byte(r.file(upgrade.SlotBBootstrapFile)))
				if r.Serving().Generation != 2 || err != nil || delta == (tc.running == "DELTA_GRPC") {
					t.Errorf("the new Envoy serves as generation %d on a bootstrap of delta ADS %v (%v), written %v", r.Serving().Generation, delta, err, r.written)
				}
			}
			if tc.wantCount != "" {
				to, result, _ := strings.Cut(tc.wantCount, "/")
				if n := testutil.ToFloat64(r.follow.changes.WithLabelValues(to, result)); n != 1 {
					t.Errorf("zoneproxy_xds_protocol_changes_total{to=%q,result=%q} = %v, want 1", to, result, n)
				}
			}
			if n := testutil.CollectAndCount(r.follow.changes); tc.wantCount == "" && n != 0 {
				t.Errorf("%d protocol changes counted, want none", n)
			}
			r.EndRetirements()
		})
	}
}

// Refusals of Envoy's protocol come every few seconds while kuma-cp
// refuses it; each check is a bootstrap request, so one per followEvery.
// A control plane back from an outage says so once: checked each time.
func TestProtocolChecksPromptedByRefusalsArePaced(t *testing.T) {
	r, asked := newFollowRig(t, false, "GRPC", offers("GRPC", "cp.example"))
	r.serving.Store(true)
	ctx := context.Background()
	for _, step := range []struct {
		unserved bool
		want     int32
	}{{true, 1}, {true, 1}, {false, 2}, {false, 3}, {true, 3}} {
		r.FollowControlPlane(ctx, "test", step.unserved)
		if got := asked.Load(); got != step.want {
			t.Fatalf("after a check (unserved %v): %d bootstrap requests, want %d", step.unserved, got, step.want)
		}
	}
	r.follow.mu.Lock()
	r.follow.last = time.Now().Add(-followEvery)
	r.follow.mu.Unlock()
	r.FollowControlPlane(ctx, "test", true)
	if got := asked.Load(); got != 4 {
		t.Fatalf("a refusal followEvery after the last check made %d requests in all, want 4", got)
	}
}
