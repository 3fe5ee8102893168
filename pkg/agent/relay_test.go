package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

func TestServingDetailSaysWhyTheCacheServes(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		x       *relayWatch
		want    string
		without string
	}{
		{"direct mode", nil, "Envoy ready", "cached"},
		{"from the control plane", &relayWatch{}, "Envoy ready", "cached"},
		{"cache, control plane away", &relayWatch{cached: relay.CacheState{InUse: true, WrittenAt: at, Since: at.Add(time.Hour)}},
			"serving the cached configuration of 2026-11-20T08:00:00Z since 2026-11-20T09:00:00Z: the control plane is unreachable", ""},
		{"cache, control plane refusing", &relayWatch{cached: relay.CacheState{InUse: true, WrittenAt: at, Since: at}, streamErr: "authentication failed: token expired"},
			"the control plane refuses the configuration stream: authentication failed: token expired", "unreachable"},
		{"cache after a restart", &relayWatch{cached: relay.CacheState{InUse: true, Held: true, WrittenAt: at, Since: at}, streamErr: "there is already an active stream from this node, try again later"},
			"kuma-cp still holds the stream of this proxy's previous run (expected after a restart)", "unreachable"},
		{"cache, another proxy with this name", &relayWatch{cached: relay.CacheState{InUse: true, Held: true, WrittenAt: at, Since: at}, upstream: relay.Upstream{State: relay.AnotherProxy}},
			"another zone proxy runs with this --name", "expected after a restart"},
	}
	for _, tt := range tests {
		got := tt.x.servingDetail()
		if !strings.Contains(got, tt.want) || (tt.without != "" && strings.Contains(got, tt.without)) {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
}

// /status says in words what kuma-cp makes of the proxy, for every state
// the relay reports.
func TestControlPlaneWordsForEveryState(t *testing.T) {
	tests := []struct {
		state   relay.UpstreamState
		relayed bool
		want    string
	}{
		{relay.Connected, true, "its Dataplane is registered"},
		{relay.Held, true, "registers it anew from this proxy's next stream"},
		{relay.AnotherProxy, true, "another zone proxy runs with this --name"},
		{relay.Unreachable, true, "does not answer"},
		{relay.Refused, true, "refused this proxy's stream: authentication failed"},
		{relay.Withdrawn, true, "egress listener NotReady"},
		{"", true, "no stream yet"},
		{"", false, "--xds-relay=false"},
	}
	for _, tt := range tests {
		if got := controlPlaneWords(tt.state, tt.relayed, "authentication failed"); !strings.Contains(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.state, got, tt.want)
		}
	}
}
