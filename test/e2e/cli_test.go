package e2e

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// What `--help` lists: the flags the command uses, each with its variable.
func TestHelpListsTheFlagsEachCommandUses(t *testing.T) {
	cases := []struct {
		args  []string
		has   []string
		lacks []string
	}{
		{[]string{"render", "dataplane"}, []string{"--mesh", "--admin-port"}, []string{"--drain-time", "--retry-max", "--cp-address", "--envoy-arg"}},
		{[]string{"render", "meshzoneaddress"}, []string{"--zone", "--advertised-port"}, []string{"--drain-time", "--retry-max", "--dataplane-token-file"}},
		{[]string{"bootstrap"}, []string{"--cp-address", "--dataplane-token-file"}, []string{"--drain-time", "--retry-max", "--envoy-arg"}},
		{[]string{"check"}, []string{"--drain-time", "--envoy-arg", "--envoy-component-log-level"}, []string{"--zone"}},
		{[]string{"run"}, []string{"--drain-time", "--envoy-arg", "--envoy-component-log-level"}, []string{"--zone", "--advertised-port"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, help := harness.Run(t, bins.Zoneproxy, nil, append(tc.args, "--help")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, help)
			}
			for _, f := range tc.has {
				env := "ZONEPROXY_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(f, "--"), "-", "_"))
				line := flagLine(help, f)
				if line == "" || !strings.Contains(line, "(env "+env+")") {
					t.Errorf("no %s with (env %s): %q", f, env, line)
				}
			}
			for _, f := range tc.lacks {
				if flagLine(help, f) != "" {
					t.Errorf("lists %s, which it does not use", f)
				}
			}
		})
	}
}

func flagLine(help, flag string) string {
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, " "+flag+" ") {
			return l
		}
	}
	return ""
}

// A command line zoneproxy cannot run exits 64 (EX_USAGE) and says what
// to type; a kuma-dp unit's flags are answered with zoneproxy's.
func TestUsageErrorsExit64(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{nil, []string{"which command?"}},
		{[]string{"chekc"}, []string{`unknown command "chekc"`, "check"}},
		{[]string{"render"}, []string{"render which resource?"}},
		{[]string{"run", "extra"}, []string{"takes no arguments"}},
		{[]string{"run", "--mesh"}, []string{"flag needs an argument: --mesh"}},
		{[]string{"check", "--cp-adress", "https://cp:5678"}, []string{"unknown flag --cp-adress (did you mean --cp-address?)"}},
		{[]string{"render", "dataplane", "--retry-max", "9s"}, []string{"--retry-max: a flag of zoneproxy check and zoneproxy run, not of zoneproxy render dataplane"}},
		{[]string{"run", "--mesh", "payments", "--binary-path", "/usr/local/bin/envoy", "--dns-enabled=false", "-d", "/etc/kuma/dp.yaml", "--admin-port", "9903"}, []string{
			"unknown flag --binary-path: kuma-dp's --binary-path is --envoy-binary in zoneproxy",
			"unknown flag --dns-enabled: kuma-dp's --dns-enabled is not needed for a zone proxy",
			"unknown flag -d (kuma-dp's --dataplane-file): not needed for a zone proxy",
			"Run 'zoneproxy run --help' for usage.",
		}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out := harness.Run(t, bins.Zoneproxy, nil, tc.args...)
			if code != 64 {
				t.Errorf("exit %d, want 64", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// One env file serves every command: run's settings do not trouble
// render, and meshzoneaddress's do not trouble run's validation.
func TestOneEnvFileForEveryCommand(t *testing.T) {
	env := []string{
		"ZONEPROXY_MESH=payments", "ZONEPROXY_ROLE=ingress", "ZONEPROXY_ADDRESS=10.0.0.5",
		"ZONEPROXY_DRAIN_TIME=45s", "ZONEPROXY_RETRY_MAX=10s", "ZONEPROXY_ENVOY_ARG=--stats-tag a:b",
		"ZONEPROXY_ZONE=zone-1", "ZONEPROXY_ADVERTISED_ADDRESS=203.0.113.10", "ZONEPROXY_ADVERTISED_PORT=443",
	}
	code, out := harness.Run(t, bins.Zoneproxy, env, "render", "dataplane")
	if code != 0 || !strings.Contains(out, "type: ZoneIngress") {
		t.Fatalf("render dataplane: exit %d\n%s", code, out)
	}
	code, out = harness.Run(t, bins.Zoneproxy, env, "render", "meshzoneaddress")
	if code != 0 || !strings.Contains(out, "kuma.io/zone: zone-1") || !strings.Contains(out, "port: 443") {
		t.Fatalf("render meshzoneaddress: exit %d\n%s", code, out)
	}
	// A mistake in a setting render does not take as a flag is named by
	// its variable, and a misspelt variable is still an error.
	code, out = harness.Run(t, bins.Zoneproxy, append(env, "ZONEPROXY_DRAIN_TIME=45", "ZONEPROXY_RETRY_MAXIMUM=1m"), "render", "dataplane")
	if code != 78 || !strings.Contains(out, "ZONEPROXY_DRAIN_TIME: 45 has no unit") || !strings.Contains(out, "ZONEPROXY_RETRY_MAXIMUM: not a setting of zoneproxy (did you mean ZONEPROXY_RETRY_MAX?)") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// --envoy-arg and --envoy-component-log-level reach Envoy after the
// agent's own arguments, --cpuset-threads stands for concurrency 0, and
// the stand-in (which parses Envoy's real command line) runs with them.
func TestEnvoyArgumentsReachEnvoy(t *testing.T) {
	t.Parallel()
	addrFile := filepath.Join(harness.ShortTempDir(t), "admin-address")
	_, _, agent := readyEgress(t, nil, "--envoy-component-log-level", "upstream:debug,connection:trace",
		"--envoy-arg", "--admin-address-path", "--envoy-arg", addrFile)
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(agent.EnvoyPID(promptly)) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(string(bytes.TrimSuffix(raw, []byte{0})), "\x00")
	tail := strings.Join(argv[len(argv)-5:], " ")
	if want := "--component-log-level upstream:debug,connection:trace --cpuset-threads --admin-address-path " + addrFile; tail != want {
		t.Errorf("Envoy's command line ends %q, want %q", tail, want)
	}
	if b, err := os.ReadFile(addrFile); err != nil || len(b) == 0 {
		t.Errorf("Envoy did not act on --admin-address-path: %v", err)
	}
}

func TestEnvoyArgumentsTheAgentSetsAreRefused(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p,
		"--envoy-arg", "--concurrency", "--envoy-arg", "2", "--envoy-arg", "-l", "--envoy-component-log-level", "upstream")...)
	for _, want := range []string{
		`--envoy-arg: "--concurrency" is the agent's to set: use --concurrency`,
		`--envoy-arg: "-l" is the agent's to set: use --envoy-log-level`,
		`--envoy-component-log-level: "upstream" is not <component>:<level>`,
	} {
		if code != 78 || !strings.Contains(out, want) {
			t.Errorf("exit %d, lacks %q", code, want)
		}
	}
	if len(zone.CP.Proxies()) != 0 {
		t.Error("a refused configuration reached the control plane")
	}
}

// check next to the running instance of the same configuration notes the
// ports that instance holds instead of failing; another instance, or
// another program, on them still fails.
func TestCheckNextToItsRunningInstance(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil)
	check := zone.Args(p)
	check[0] = "check"
	held := "[note] ports in use by zoneproxy (pid " + strconv.Itoa(agent.PID()) + ", this config): " +
		"127.0.0.1:" + strconv.Itoa(p.Readiness) + ", 127.0.0.1:" + strconv.Itoa(p.Egress) + "\n"

	t.Run("the same work dir", func(t *testing.T) {
		code, out := harness.Run(t, bins.Zoneproxy, nil, check...)
		if code != 0 || !strings.Contains(out, held) || !strings.Contains(out, "all checks passed") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("another work dir is another zone proxy", func(t *testing.T) {
		code, out := harness.Run(t, bins.Zoneproxy, nil, append(check, "--work-dir", p.WorkDir+"-other")...)
		if code == 0 || !strings.Contains(out, "[FAIL] ports are free") || !strings.Contains(out, "--readiness-port") || strings.Contains(out, "this config") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("a port held by another program", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		code, out := harness.Run(t, bins.Zoneproxy, nil, append(check, "--metrics-address", l.Addr().String())...)
		if code == 0 || !strings.Contains(out, "[FAIL] ports are free") || !strings.Contains(out, "--metrics-address") || !strings.Contains(out, held) {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
}

// Without --work-dir, the agent's work dir is one per name (under /run
// or $XDG_RUNTIME_DIR), else a temporary one; check finds the running
// instance of its config either way (by that work dir's lock, or by the
// --config file), and a config of another name is another zone proxy.
func TestCheckFindsTheInstanceOfItsConfig(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	name := "zp-find-" + strconv.Itoa(p.Readiness)
	config := func(name string) string {
		return strings.Join([]string{
			"mesh: payments", "role: egress", "name: " + name, "address: 127.0.0.1",
			"cp-address: " + zone.CP.URL(), "ca-cert-file: " + zone.CP.CACertFile(),
			"dataplane-token-file: " + p.TokenFile, "envoy-binary: " + bins.Envoy,
			"readiness-port: " + strconv.Itoa(p.Readiness), "egress-port: " + strconv.Itoa(p.Egress),
			"retry-initial: 50ms", "retry-max: 200ms", "drain-time: 2s",
		}, "\n") + "\n"
	}
	file := filepath.Join(zone.Dir, "payments-egress.yaml")
	if err := os.WriteFile(file, []byte(config(name)), 0o600); err != nil {
		t.Fatal(err)
	}
	// As systemd would not: no RUNTIME_DIRECTORY; a runtime dir of the
	// test's own for a user other than root.
	env := []string{"RUNTIME_DIRECTORY=", "XDG_RUNTIME_DIR=" + zone.Dir}
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/run/zoneproxy", name)) })
	agent := harness.StartAgent(t, bins.Zoneproxy, env, "run", "--config", file)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	// The work dir is the name's, the same at every start, so that the
	// next run can serve this one's cache.
	workDir := filepath.Join(zone.Dir, "zoneproxy", name)
	if os.Geteuid() == 0 {
		workDir = filepath.Join("/run/zoneproxy", name)
	}
	if _, err := os.Stat(filepath.Join(workDir, "zoneproxy.lock")); err != nil {
		t.Errorf("the agent does not work in %s: %v", workDir, err)
	}

	code, out := harness.Run(t, bins.Zoneproxy, env, "check", "--config", file)
	if code != 0 || !strings.Contains(out, "in use by zoneproxy (pid "+strconv.Itoa(agent.PID())+", this config)") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	other := filepath.Join(zone.Dir, "other.yaml")
	if err := os.WriteFile(other, []byte(config(name+"-other")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/run/zoneproxy", name+"-other")) })
	if code, out := harness.Run(t, bins.Zoneproxy, env, "check", "--config", other); code == 0 || !strings.Contains(out, "[FAIL] ports are free") {
		t.Fatalf("a config of another name is another zone proxy: exit %d\n%s", code, out)
	}
}
