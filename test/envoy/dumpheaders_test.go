package main

import (
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

func TestDumpADSHeadersHook(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, nil)
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: cp.port(), CA: base64.StdEncoding.EncodeToString(p.caPEM), Token: testToken})

	tests := []struct {
		name  string
		env   []string
		level string
		shown bool
	}{
		{"hook at debug", []string{"ENVOY_STANDIN_DUMP_ADS_HEADERS=1"}, "debug", true},
		{"hook at info: debug lines are not written", []string{"ENVOY_STANDIN_DUMP_ADS_HEADERS=1"}, "info", false},
		{"no hook", nil, "debug", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := startEnvoy(t, tt.env, "--config-path", path, "--log-level", tt.level, "--disable-hot-restart")
			waitFor(t, 10*time.Second, "the ADS stream", func() bool {
				return cp.streamCount() > 0 && strings.Contains(proc.stderr.String(), "config stream to system_ads established")
			})
			out := proc.stderr.String()
			line := "\n'authorization', '" + testToken + "'\n"
			if got := strings.Contains(out, line); got != tt.shown {
				t.Fatalf("token line shown %v, want %v:\n%s", got, tt.shown, out)
			}
			if tt.shown && !strings.Contains(out, "[debug][router] [source/common/router/router.cc:738] ") {
				t.Fatalf("the dump is not a router debug entry:\n%s", out)
			}
			proc.cmd.Process.Kill()
			<-proc.done
		})
	}
}
