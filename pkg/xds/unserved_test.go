package xds

import (
	"strings"
	"testing"
	"time"
)

// A control plane that answers, but not Envoy's ADS protocol, is never
// called unreachable, in /status or in READY's detail.
func TestAControlPlaneThatAnswersIsNeverCalledUnreachable(t *testing.T) {
	for _, tc := range []struct {
		state UpstreamState
		want  string
	}{
		{Unserved, "refuses the ADS protocol Envoy was started with"},
		{Unanswered, "has not answered it"},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			says := ControlPlaneWords(tc.state, true, "")
			st := StreamState{Upstream: Upstream{State: tc.state}, Cached: CacheState{InUse: true, Since: time.Now(), WrittenAt: time.Now()}}
			for _, words := range []string{says, st.ServingDetail()} {
				if strings.Contains(words, "unreachable") || strings.Contains(words, "does not answer") || !strings.Contains(words, tc.want) {
					t.Errorf("%q, want %q and no word of an unreachable control plane", words, tc.want)
				}
			}
		})
	}
}

func TestADSIsDeltaReadsTheBootstrapsAPIType(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		delta     bool
		err       bool
	}{
		{"kuma-cp 3.0, YAML camelCase", "dynamicResources:\n  adsConfig:\n    apiType: DELTA_GRPC\n", true, false},
		{"kuma-cp 2.14, YAML camelCase", "dynamicResources:\n  adsConfig:\n    apiType: GRPC\n", false, false},
		{"rewritten JSON, snake_case", `{"dynamic_resources":{"ads_config":{"api_type":"DELTA_GRPC"}}}`, true, false},
		{"no ADS", `{"admin":{}}`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delta, err := ADSIsDelta([]byte(tc.doc))
			if (err != nil) != tc.err || delta != tc.delta {
				t.Errorf("ADSIsDelta = %t, %v; want %t, error %t", delta, err, tc.delta, tc.err)
			}
		})
	}
}
