package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xdsrelay"
)

func TestServingDetailSaysWhyTheCacheServes(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		x       *xds
		want    string
		without string
	}{
		{"direct mode", nil, "Envoy ready", "cached"},
		{"from the control plane", &xds{}, "Envoy ready", "cached"},
		{"cache, control plane away", &xds{cached: xdsrelay.CacheState{InUse: true, WrittenAt: at, Since: at.Add(time.Hour)}},
			"serving the cached configuration of 2026-11-20T08:00:00Z since 2026-11-20T09:00:00Z: the control plane is unreachable", ""},
		{"cache, control plane refusing", &xds{cached: xdsrelay.CacheState{InUse: true, WrittenAt: at, Since: at}, streamErr: "authentication failed: token expired"},
			"the control plane refuses the configuration stream: authentication failed: token expired", "unreachable"},
	}
	for _, tt := range tests {
		got := tt.x.servingDetail()
		if !strings.Contains(got, tt.want) || (tt.without != "" && strings.Contains(got, tt.without)) {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
}
