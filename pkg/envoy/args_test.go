package envoy

import (
	"reflect"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	base := []string{"--drain-strategy", "immediate", "--disable-hot-restart", "--file-flush-interval-msec", "1000"}
	cases := []struct {
		name string
		opts Options
		want []string
	}{
		{"no concurrency: Envoy sizes its workers to the usable CPUs",
			Options{ConfigPath: "/w/bootstrap.yaml", DrainTime: 30 * time.Second, LogLevel: "info"},
			join([]string{"--config-path", "/w/bootstrap.yaml", "--drain-time-s", "30"}, base, []string{"--log-level", "info", "--cpuset-threads"})},
		{"a concurrency, drain time rounded up",
			Options{ConfigPath: "/b", DrainTime: 1500 * time.Millisecond, LogLevel: "debug", Concurrency: 2},
			join([]string{"--config-path", "/b", "--drain-time-s", "2"}, base, []string{"--log-level", "debug", "--concurrency", "2"})},
		{"component levels, then the extra arguments last",
			Options{ConfigPath: "/b", LogLevel: "info", ComponentLogLevel: "upstream:debug,http:trace", Concurrency: 1, Extra: []string{"--log-format", "[%l] %v", "--stats-tag a:b"}},
			join([]string{"--config-path", "/b", "--drain-time-s", "0"}, base, []string{"--log-level", "info", "--component-log-level", "upstream:debug,http:trace", "--concurrency", "1", "--log-format", "[%l] %v", "--stats-tag a:b"})},
	}
	for _, tc := range cases {
		if got := Args(tc.opts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestReservedArg(t *testing.T) {
	cases := []struct {
		arg     string
		instead string // "" when Envoy may have it
	}{
		{"--concurrency", "use --concurrency"},
		{"--concurrency 4", "use --concurrency"},
		{"--concurrency=4", "use --concurrency"},
		{"-l", "use --envoy-log-level"},
		{"--log-level", "use --envoy-log-level"},
		{"--component-log-level", "use --envoy-component-log-level"},
		{"--drain-time-s", "use --drain-time"},
		{"-c", "the agent runs Envoy with the control plane's bootstrap"},
		{"--config-path /etc/envoy.yaml", "the agent runs Envoy with the control plane's bootstrap"},
		{"--cpuset-threads", "the agent passes it when --concurrency is 0"},
		{"--base-id", hotRestart},
		{"--restart-epoch 1", hotRestart},
		{"--log-path", "Envoy's log goes through the agent, which keeps the token out of it, to stderr (the journal under systemd)"},
		// Envoy's own, the agent has no say in them.
		{"--log-format", ""},
		{"--stats-tag", ""},
		{"--disable-extensions", ""},
		{"--local-address-ip-version v6", ""},
		// A value, not a flag.
		{"debug", ""},
		{"-", ""},
		{"--concurrencyx", ""},
	}
	for _, tc := range cases {
		instead, ok := ReservedArg(tc.arg)
		if ok != (tc.instead != "") || instead != tc.instead {
			t.Errorf("ReservedArg(%q) = %q, %v; want %q", tc.arg, instead, ok, tc.instead)
		}
	}
}

// Every flag the agent itself passes is reserved, so an extra argument
// can never repeat one (Envoy would refuse: "Argument already set!").
func TestAgentsOwnFlagsAreReserved(t *testing.T) {
	for _, o := range []Options{{ComponentLogLevel: "upstream:debug"}, {Concurrency: 3}} {
		for _, a := range Args(o) {
			if len(a) > 1 && a[0] == '-' {
				if _, ok := ReservedArg(a); !ok {
					t.Errorf("the agent passes %s but an --envoy-arg may repeat it", a)
				}
			}
		}
	}
}
