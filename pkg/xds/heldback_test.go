package xds

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

const egressListener = "self_zoneegress_dp_ze-port"

func cachedWith(names ...string) *lkgcache.Snapshot {
	ts := lkgcache.TypeState{TypeURL: listenerTypeURL}
	for _, n := range names {
		ts.Resources = append(ts.Resources, lkgcache.Resource{Name: n})
	}
	return &lkgcache.Snapshot{Types: []lkgcache.TypeState{ts}}
}

// Whether a start holds its egress back: only when nothing proves its
// listener, so that a restart on a cache that holds it costs no
// re-registration.
func TestAnEgressIsHeldBackUntilItsListenerIsProved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		listener string
		cached   *lkgcache.Snapshot
		held     bool
	}{
		{name: "an ingress has no egress listener", listener: ""},
		{name: "a first start", listener: egressListener, held: true},
		{name: "a cache without the egress listener", listener: egressListener, cached: cachedWith("self_zoneingress_dp_zi-port"), held: true},
		{name: "a cache that holds it", listener: egressListener, cached: cachedWith("self_zoneingress_dp_zi-port", egressListener)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdBack(tc.listener, tc.cached, nil) != nil; got != tc.held {
				t.Errorf("held back %v, want %v", got, tc.held)
			}
		})
	}
}

// Held back, every registration the relay sends says NotReady; once
// Envoy has the listener the relay registers anew, Ready, and /status
// says where that stands until kuma-cp accepts it.
func TestAHeldBackEgressRegistersReadyOnceEnvoyHasItsListener(t *testing.T) {
	for _, streamOpen := range []bool{true, false} {
		r := &fakeRelay{streamOpen: streamOpen}
		held := holdBack(egressListener, nil, nil)
		w := &watch{log: zap.NewNop(), held: held}
		f := &Feature{relay: r, watch: w, notes: zap.NewNop(), held: held}

		md := &structpb.Struct{Fields: map[string]*structpb.Value{nodeResourceKey: structpb.NewStringValue(egressDataplane)}}
		held.mark(md)
		if got := md.Fields[nodeResourceKey].GetStringValue(); !strings.Contains(got, `"state":"NotReady"`) {
			t.Fatalf("held back, the relay registers %s", got)
		}
		if st := f.Stream(); st.Egress != HeldBackWords || !strings.Contains(st.ServingDetail(), "held back from kuma-cp's zone egress set") {
			t.Errorf("held back, the stream says %q", st.ServingDetail())
		}

		f.ZoneListenersPresent([]string{"self_zoneingress_dp_zi-port"})
		if r.reregisters != 0 {
			t.Fatal("registered anew before Envoy had the egress listener")
		}
		f.ZoneListenersPresent([]string{egressListener})
		f.ZoneListenersPresent([]string{egressListener}) // every check says so
		if r.reregisters != 1 {
			t.Fatalf("registered anew %d times, want once", r.reregisters)
		}
		md = &structpb.Struct{Fields: map[string]*structpb.Value{nodeResourceKey: structpb.NewStringValue(egressDataplane)}}
		held.mark(md)
		if got := md.Fields[nodeResourceKey].GetStringValue(); got != egressDataplane {
			t.Errorf("released, the relay registers %s, want the Dataplane as it is", got)
		}
		if st := f.Stream(); st.Egress != RegisteringWords {
			t.Errorf("registering, the stream says %q", st.Egress)
		}
		if streamOpen {
			w.upstreamChanged(Upstream{State: Connected}) // the old stream's last word
			if f.Stream().Egress != RegisteringWords {
				t.Errorf("the closed NotReady stream counted as the Ready registration")
			}
			w.upstreamChanged(Upstream{State: Held})
		}
		w.upstreamChanged(Upstream{State: Connected})
		if st := f.Stream(); st.Egress != "" {
			t.Errorf("once kuma-cp took the Ready registration, the stream says %q", st.Egress)
		}
	}
}

// kuma-cp 2.14 answers a zone ingress without MeshService no listener
// subscription at all: the agent says so only while kuma-cp has the stream
// and Envoy holds no listener.
func TestNoListenersSentIsSaidOnlyWhileKumaCPHasTheStream(t *testing.T) {
	for _, tc := range []struct {
		name       string
		state      UpstreamState
		unanswered []string
		want       bool
	}{
		{name: "connected, listeners never answered", state: Connected, unanswered: []string{listenerTypeURL}, want: true},
		{name: "connected, clusters still coming", state: Connected, unanswered: []string{"type.googleapis.com/envoy.config.cluster.v3.Cluster"}},
		{name: "held by kuma-cp", state: Held, unanswered: []string{listenerTypeURL}},
		{name: "everything answered", state: Connected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Feature{relay: &fakeRelay{state: relay.State{Upstream: Upstream{State: tc.state}}, unanswered: tc.unanswered}}
			if got := f.NoListenersSent(); got != tc.want {
				t.Errorf("NoListenersSent() = %v, want %v", got, tc.want)
			}
		})
	}
	if (*Feature)(nil).NoListenersSent() {
		t.Error("direct mode cannot know")
	}
}

// The words name what Kuma 2.14 waits for, per role.
func TestNoListenersWordsNameWhatKuma214WaitsFor(t *testing.T) {
	for role, want := range map[config.Role][]string{
		config.RoleIngress:  {"MeshService"},
		config.RoleEgress:   {"MeshIdentity"},
		config.RoleCombined: {"MeshService", "MeshIdentity"},
	} {
		got := NoListenersWords(role)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not name %s", role, got, w)
			}
		}
		if role == config.RoleEgress && strings.Contains(got, "MeshService") {
			t.Errorf("egress: %q names the ingress's condition", got)
		}
	}
}
