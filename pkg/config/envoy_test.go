package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
)

// --envoy-component-log-level and --envoy-arg: every mistake is reported,
// each naming the setting and what to write instead.
func TestEnvoyCommandLine(t *testing.T) {
	cases := []struct {
		name      string
		component string
		args      []string
		problems  []string // one per expected problem, in order
	}{
		{"unset", "", nil, nil},
		{"component levels", "upstream:debug,connection:trace,http2:warn", nil, nil},
		{"Envoy's own flags", "", []string{"--log-format", "[%l] %v", "--stats-tag a:b", "--disable-extensions=x"}, nil},
		{"no level", "upstream", nil, []string{`--envoy-component-log-level: "upstream" is not <component>:<level>`}},
		{"two colons", "upstream:debug:x", nil, []string{`"upstream:debug:x" is not <component>:<level>`}},
		{"a level Envoy lacks", "upstream:verbose", nil, []string{`"upstream:verbose": "verbose" is not an Envoy log level: use one of trace`}},
		{"not a logger name", "Up-Stream:debug", nil, []string{`"Up-Stream:debug": "Up-Stream" is not an Envoy logger name`}},
		{"every part checked", "upstream:loud,,http:debug", nil, []string{`"upstream:loud": "loud" is not an Envoy log level`, `"" is not <component>:<level>`}},
		{"the agent's flags", "", []string{"--concurrency 4", "--log-format", "%v", "-l", "debug", "--config-path=/x"}, []string{
			`--envoy-arg: "--concurrency 4" is the agent's to set: use --concurrency`,
			`--envoy-arg: "-l" is the agent's to set: use --envoy-log-level`,
			`--envoy-arg: "--config-path=/x" is the agent's to set: the agent runs Envoy with the control plane's bootstrap`,
		}},
		{"both at once", "x", []string{"--drain-time-s"}, []string{`--envoy-component-log-level: "x"`, `--envoy-arg: "--drain-time-s" is the agent's to set: use --drain-time`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.EnvoyComponentLogLevel = tc.component
			c.EnvoyArgs = tc.args
			err := c.ValidateResource()
			var merr *multierror.Error
			if err != nil && !errors.As(err, &merr) {
				t.Fatalf("not a list of problems: %v", err)
			}
			var got []error
			if merr != nil {
				got = merr.Errors
			}
			if len(got) != len(tc.problems) {
				t.Fatalf("got %d problems, want %d: %v", len(got), len(tc.problems), err)
			}
			for i, want := range tc.problems {
				if !strings.Contains(got[i].Error(), want) {
					t.Errorf("problem %d = %q, want %q", i, got[i], want)
				}
			}
		})
	}
}
