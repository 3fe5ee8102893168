package dataplane

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func spec(ingress, egress uint32) Spec {
	return Spec{
		Mesh: "payments", Name: "zone-proxy-payments-egress-vm1", Workload: "zone-proxy-payments-egress",
		Labels: map[string]string{"team": "net"}, Address: "10.0.0.5", AdminPort: 9901,
		IngressPort: ingress, EgressPort: egress,
	}
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]Spec{
		"egress":   spec(0, 10002),
		"ingress":  spec(10001, 0),
		"combined": spec(10001, 10002),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			dp := Render(s)
			for ext, got := range map[string]string{"yaml": dp.YAML(), "json": dp.JSON() + "\n"} {
				path := filepath.Join("testdata", name+"."+ext)
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./pkg/kuma/dataplane -update)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs from %s:\n%s", ext, path, got)
				}
			}
			if errs := append(dp.ValidateMeta(), dp.Validate()...); len(errs) > 0 {
				t.Errorf("rendered Dataplane is invalid: %v", errs)
			}
		})
	}
}

func TestEnvoyListenerNames(t *testing.T) {
	dp := Render(spec(10001, 10002))
	got := []string{dp.Networking.Listeners[0].EnvoyListenerName(), dp.Networking.Listeners[1].EnvoyListenerName()}
	want := []string{"self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if n := (Listener{Type: TypeZoneEgress, Port: 8080}).EnvoyListenerName(); n != "self_zoneegress_dp_8080" {
		t.Fatalf("unnamed listener: %s", n)
	}
}

// The messages are the control plane's (kuma-cp 422 bodies), field for field.
func TestValidateMatchesControlPlane(t *testing.T) {
	l := func(typ, addr string, port uint32, name string) Listener {
		return Listener{Type: typ, Address: addr, Port: port, Name: name}
	}
	cases := []struct {
		name      string
		address   string
		listeners []Listener
		want      string
	}{
		{"valid combined", "127.0.0.1", []Listener{l(TypeZoneIngress, "127.0.0.1", 10001, "zi-port"), l(TypeZoneEgress, "127.0.0.1", 10002, "ze-port")}, ""},
		{"listener without type", "127.0.0.1", []Listener{l("", "127.0.0.1", 10002, "ze-port")},
			"networking.listeners[0].type: type must be ZoneIngress or ZoneEgress"},
		{"no addresses", "", []Listener{l(TypeZoneEgress, "", 10002, "ze-port")},
			"networking.address: address can't be empty; networking.listeners[0].address: address can't be empty"},
		{"wildcard and port 0", "127.0.0.1", []Listener{l(TypeZoneEgress, "0.0.0.0", 0, "ze-port")},
			"networking.listeners[0].address: must not be 0.0.0.0 or ::; networking.listeners[0].port: port must be in the range [1, 65535]"},
		{"ipv6 wildcard", "::", nil, "networking.address: must not be 0.0.0.0 or ::"},
		{"same addr:port different types", "127.0.0.1", []Listener{l(TypeZoneIngress, "127.0.0.1", 10001, "p"), l(TypeZoneEgress, "127.0.0.1", 10001, "p")},
			`networking.listeners[1].name: name "p" must be unique across inbounds and listeners; networking.listeners[1]: address:port 127.0.0.1:10001 is used by listeners of different types`},
		{"same addr:port same type", "127.0.0.1", []Listener{l(TypeZoneEgress, "127.0.0.1", 10002, "a"), l(TypeZoneEgress, "127.0.0.1", 10002, "b")},
			"networking.listeners[1]: address:port 127.0.0.1:10002 is already used by another listener"},
		{"not an address", "not an address!", nil, "networking.address: address has to be valid IP address or domain name"},
		{"hostname is allowed", "proxy.zone-1.internal", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dp := Dataplane{Type: "Dataplane", Mesh: "m", Name: "n", Networking: Networking{Address: tc.address, Listeners: tc.listeners}}
			got := ""
			if errs := dp.Validate(); len(errs) > 0 {
				got = errs.Error()
			}
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateMeta(t *testing.T) {
	cases := []struct {
		mesh, name, workload string
		wantFields           []string
	}{
		{"payments", "zp-1", "zp", nil},
		{"", "zp-1", "", []string{"mesh"}},
		{"Payments", "zp-1", "", []string{"mesh"}},
		{"pay.ments", "zp-1", "", []string{"mesh"}},
		{"payments", "ZP_1", "", []string{"name"}},
		{"payments", "zp-1", "1zp", []string{`labels["kuma.io/workload"]`}},
	}
	for _, tc := range cases {
		dp := Dataplane{Mesh: tc.mesh, Name: tc.name}
		if tc.workload != "" {
			dp.Labels = map[string]string{WorkloadLabel: tc.workload}
		}
		errs := dp.ValidateMeta()
		var got []string
		for _, e := range errs {
			got = append(got, e.Field)
		}
		if len(got) != len(tc.wantFields) || (len(got) > 0 && got[0] != tc.wantFields[0]) {
			t.Errorf("%q/%q/%q: got %v, want %v", tc.mesh, tc.name, tc.workload, got, tc.wantFields)
		}
	}
}

func TestSanitize(t *testing.T) {
	cases := []struct{ in, name, label string }{
		{"zone-proxy-payments-egress-vm1", "zone-proxy-payments-egress-vm1", "zone-proxy-payments-egress-vm1"},
		{"Zone_Proxy--Payments..VM", "zone-proxy-payments.vm", "zone-proxy-payments-vm"},
		{"--a--", "a", "a"},
		{"1abc", "1abc", "x-1abc"},
		{"", "", ""},
		{"ÄÖÜ host", "host", "host"},
	}
	for _, tc := range cases {
		if got := SanitizeName(tc.in); got != tc.name {
			t.Errorf("SanitizeName(%q) = %q, want %q", tc.in, got, tc.name)
		}
		if got := SanitizeLabel(tc.in); got != tc.label {
			t.Errorf("SanitizeLabel(%q) = %q, want %q", tc.in, got, tc.label)
		}
	}
	long := SanitizeLabel(string(make([]byte, 0)) + "a" + string(bytesOf('b', 100)))
	if len(long) != 63 {
		t.Errorf("label not cut to 63: %d", len(long))
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{"zone-proxy-payments-egress-vm1", "Zone_Proxy..VM", "", "-.-", "ÄÖÜ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := SanitizeName(s)
		if n != "" && (len(n) > 253 || !validDNS1123Subdomain(n)) {
			t.Fatalf("SanitizeName(%q) = %q is not a valid name", s, n)
		}
		l := SanitizeLabel(s)
		if l != "" && (len(l) > 63 || !validDNS1035Label(l)) {
			t.Fatalf("SanitizeLabel(%q) = %q is not a valid label", s, l)
		}
	})
}
