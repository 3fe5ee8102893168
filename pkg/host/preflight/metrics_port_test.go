package preflight

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// The agent's own listeners: readiness always, metrics when
// --metrics-address asks for a listener of its own.
func TestAgentPorts(t *testing.T) {
	cases := []struct {
		name, metrics string
		want          []Port
	}{
		{"metrics beside /ready", "", []Port{{"readiness-port", "127.0.0.1:9902"}}},
		{"the readiness address spelt out", "127.0.0.1:9902", []Port{{"readiness-port", "127.0.0.1:9902"}}},
		{"a listener of its own", "0.0.0.0:9903", []Port{{"readiness-port", "127.0.0.1:9902"}, {"metrics-address", "0.0.0.0:9903"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{ReadinessPort: 9902, MetricsAddress: tc.metrics}
			if got := AgentPorts(cfg); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A busy --metrics-address is named with its fix; --address has nothing
// to do with it.
func TestMetricsPortBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := &config.Config{ReadinessPort: 9902, MetricsAddress: busy.Addr().String()}
	err = CheckFree(AgentPorts(cfg)[1:]...)
	want := "cannot bind " + busy.Addr().String() + " for --metrics-address (bind: address already in use): " +
		"free the port or set --metrics-address to another one"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "--address is") {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
