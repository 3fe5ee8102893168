package upgrade

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// After a reload, the adopted Envoy is replaced only once kuma-cp's stream
// is back and only when it is not as this program would start it; what
// cannot be checked or replaced is logged, and Envoy keeps serving.
func TestAfterAReloadTheAdoptedEnvoyIsReplacedOnlyWhenItMustBe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		relay    *fakeRelay // nil: direct mode
		serving  bool
		reasons  []string
		err      error
		replace  error
		replaced bool
		says     string
	}{
		{"direct mode", nil, true, []string{"another Envoy build"}, nil, nil, false, ""},
		{"the stream does not come back", &fakeRelay{state: "held"}, true, []string{"another Envoy build"}, nil, nil, false, "did not come back in time"},
		{"Envoy is not serving", &fakeRelay{}, false, []string{"another Envoy build"}, nil, nil, false, "did not come back in time"},
		{"as it would start it", &fakeRelay{}, true, nil, nil, nil, false, "it keeps serving"},
		{"cannot tell", &fakeRelay{}, true, nil, errors.New("envoy: not found"), nil, false, "cannot tell whether Envoy must be replaced"},
		{"another build", &fakeRelay{}, true, []string{"another Envoy build (a -> b)", "the configuration changes Envoy's launch (--concurrency)"}, nil, nil, true,
			"a new Envoy took over: another Envoy build (a -> b); the configuration changes Envoy's launch (--concurrency)"},
		{"the new Envoy fails", &fakeRelay{}, true, []string{"another Envoy build"}, nil, errors.New("the new Envoy exited"), true, "a new Envoy could not take over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			var asked atomic.Bool
			r := Refresh{Log: zap.New(core), Wait: 300 * time.Millisecond,
				Relay: func() Relay {
					if tc.relay == nil {
						return nil
					}
					return tc.relay
				},
				Serving: func() bool { return tc.serving },
				Changes: func(context.Context) ([]string, []byte, error) { return tc.reasons, []byte("{}"), tc.err },
				Replace: func(context.Context, string, []byte) error { asked.Store(true); return tc.replace },
			}
			r.Run(context.Background())
			if asked.Load() != tc.replaced {
				t.Fatalf("replaced %v, want %v", asked.Load(), tc.replaced)
			}
			if tc.says != "" && logs.FilterMessageSnippet(tc.says).Len() != 1 {
				t.Fatalf("no log saying %q: %v", tc.says, logs.All())
			}
		})
	}
}
