package cli

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
)

// Without a token, the checklist's verdict on it is the control plane's:
// never "[ ok ]" above a "[FAIL]" for the same missing token.
func TestCheckWithoutAToken(t *testing.T) {
	cfg := &config.Config{Mesh: "payments", Workload: "zone-proxy-payments-egress"}
	cases := []struct {
		name   string
		cpErr  error
		says   string
		failed int
	}{
		{"the control plane accepts it", nil, "[ ok ] no dataplane token configured, and the control plane accepts this proxy without one", 0},
		{"the control plane requires one",
			&bootstrap.Error{Kind: bootstrap.Permanent, Status: 422, Body: "Dataplane Token is required. Provide token using ..."},
			"[FAIL] dataplane token configured\n       none is, and the control plane requires one: generate one with `kumactl generate dataplane-token --mesh payments --workload zone-proxy-payments-egress`", 1},
		{"the control plane did not say", errors.New("connection refused"), "[note] no dataplane token configured: this works only if", 0},
		{"another refusal", &bootstrap.Error{Kind: bootstrap.Permanent, Status: 422, Body: "name: invalid"}, "[note] no dataplane token configured", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &checklist{w: &out}
			c.checkNoToken(cfg, tc.cpErr)
			if !strings.HasPrefix(out.String(), tc.says) || c.failed != tc.failed {
				t.Errorf("check says %q (%d failed), want %q (%d failed)", out.String(), c.failed, tc.says, tc.failed)
			}
		})
	}
}

// A port in use is told in the checklist's words, one line per port,
// without a library's list formatting.
func TestCheckPortsInUse(t *testing.T) {
	var held []preflight.Port
	for _, flag := range []string{"egress-port", "admin-port"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		held = append(held, preflight.Port{Flag: flag, Addr: l.Addr().String()})
	}
	for n := 1; n <= len(held); n++ {
		var out bytes.Buffer
		(&checklist{w: &out}).checkPorts(held[:n], nil)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if lines[0] != "[FAIL] ports are free" || len(lines) != 1+n {
			t.Fatalf("%d ports in use: check says\n%s", n, out.String())
		}
		for i, line := range lines[1:] {
			if want := "       cannot bind " + held[i].Addr + " for --" + held[i].Flag; !strings.HasPrefix(line, want) {
				t.Errorf("line %q, want it to start %q", line, want)
			}
		}
		if strings.Contains(out.String(), "error occurred") || strings.Contains(out.String(), "* ") {
			t.Errorf("a list format leaks into the checklist:\n%s", out.String())
		}
	}
}
