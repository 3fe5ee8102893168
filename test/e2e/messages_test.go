package e2e

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// withoutFlag drops a flag and its value from a command line.
func withoutFlag(args []string, flag string) []string {
	i := slices.Index(args, flag)
	if i < 0 {
		return args
	}
	return append(args[:i:i], args[i+2:]...)
}

// The heading says what the exit code says: "invalid configuration" is
// 78, never restarted; a token file that is not there yet exits 1 under
// a heading that says a restart tries again.
func TestMessageHeadingMatchesTheExitCode(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	cases := []struct {
		name    string
		extra   []string
		code    int
		heading string
	}{
		{"token file missing", nil, 1, "zoneproxy: cannot start yet (1 problem):"},
		{"token file missing, and a setting wrong", []string{"--drain-time", "-1s"}, 78, "zoneproxy: invalid configuration (2 problems):"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := zone.NewProxy("payments", "egress")
			p.TokenFile = filepath.Join(harness.ShortTempDir(t), "provisioned-later")
			for _, cmd := range []string{"run", "check"} {
				args := zone.Args(p, tc.extra...)
				args[0] = cmd
				code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
				if code != tc.code || !strings.Contains(out, tc.heading) {
					t.Errorf("%s: exit %d, want %d under %q\n%s", cmd, code, tc.code, tc.heading, out)
				}
				if tc.code == 1 && strings.Contains(out, "invalid configuration") {
					t.Errorf("%s: exit 1 headed as an invalid configuration (78's words)\n%s", cmd, out)
				}
			}
		})
	}
}

// check without a token against a control plane that requires one fails
// once, on the token's line, and says nothing "ok" of it.
func TestMessageCheckWithoutATokenTheControlPlaneRequires(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	args := withoutFlag(zone.Args(p), "--dataplane-token-file")
	args[0] = "check"
	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if code != 78 || !strings.Contains(out, "[FAIL] dataplane token configured\n       none is, and the control plane requires one") || !strings.Contains(out, "\n1 check(s) failed") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Contains(out, "[ ok ] no dataplane token") {
		t.Fatalf("the missing token is both ok and failed:\n%s", out)
	}
}

// A port in use is one line under "[FAIL] ports are free", in the
// checklist's words.
func TestMessageCheckPortInUse(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.Egress))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	args := zone.Args(p)
	args[0] = "check"
	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	want := "[FAIL] ports are free\n       cannot bind 127.0.0.1:" + strconv.Itoa(p.Egress) + " for --egress-port"
	if code != 78 || !strings.Contains(out, want) || strings.Contains(out, "error occurred") {
		t.Fatalf("exit %d, want %q\n%s", code, want, out)
	}
}

// A configuration mistake is named where it is, not where it shows.
func TestMessageNamesTheTypo(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress") // its token: mesh payments, workload zone-proxy-payments-egress
	cases := []struct {
		name     string
		set      []string // flag, value: replaces the flag's value, "" drops it
		says     []string
		saysNone []string
	}{
		{"mistyped role", []string{"--role", "egres"}, []string{`--role: "egres" is not a role`}, []string{"--workload"}},
		{"no mesh", []string{"--mesh", ""}, []string{`--mesh: required: the mesh this zone proxy serves, the dataplane token is for mesh "payments": --mesh payments`}, []string{`--mesh ""`}},
		{"mistyped mesh", []string{"--mesh", "paymnets"}, []string{`token is for mesh "payments", but --mesh is "paymnets": one of the two is likely a typo`}, nil},
		{"cp-address without https://", []string{"--cp-address", "127.0.0.1:25678"}, []string{"did you mean https://127.0.0.1:25678?"}, []string{"first path segment"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := zone.Args(p)
			args[0] = "check"
			if tc.set[1] == "" {
				args = withoutFlag(args, tc.set[0])
			} else {
				args[slices.Index(args, tc.set[0])+1] = tc.set[1]
			}
			code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
			if code != 78 {
				t.Errorf("exit %d, want 78", code)
			}
			for _, s := range tc.says {
				if !strings.Contains(out, s) {
					t.Errorf("lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.saysNone {
				if strings.Contains(out, s) {
					t.Errorf("says %q:\n%s", s, out)
				}
			}
		})
	}
}
