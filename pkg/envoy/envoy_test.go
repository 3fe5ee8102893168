package envoy

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		out, version, build string
		ok                  bool
	}{
		{"\nenvoy  version: 50ef0945fa2c5da4bff7627c3abf41fdd3b7cffd/1.39.0/Clean/RELEASE/BoringSSL\n\n", "1.39.0", "50ef0945fa2c5da4bff7627c3abf41fdd3b7cffd/1.39.0/Clean/RELEASE/BoringSSL", true},
		// A revision starting with "e" keeps its first character (kuma-dp's Trim cutset ate it).
		{"envoy  version: e0123/1.38.2/Modified/DEBUG/BoringSSL-FIPS\r\n", "1.38.2", "e0123/1.38.2/Modified/DEBUG/BoringSSL-FIPS", true},
		{"envoy version: abc/1.40.0-dev/Clean/RELEASE/BoringSSL", "1.40.0-dev", "abc/1.40.0-dev/Clean/RELEASE/BoringSSL", true},
		{"", "", "", false},
		{"envoy version: nonsense", "", "", false},
		{"version: a/notaversion/x/y/z", "", "", false},
	}
	for _, tc := range cases {
		v, err := ParseVersion(tc.out)
		if (err == nil) != tc.ok || v.Version != tc.version || v.Build != tc.build {
			t.Errorf("ParseVersion(%q) = %+v, %v", tc.out, v, err)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	f.Add("envoy  version: 50ef09/1.39.0/Clean/RELEASE/BoringSSL")
	f.Add("version:")
	f.Add("version: ////")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err == nil && (v.Version == "" || !strings.Contains(v.Build, v.Version)) {
			t.Fatalf("%q parsed to %+v", s, v)
		}
	})
}

func TestSumListenerConnections(t *testing.T) {
	tests := []struct {
		name  string
		stats string
		want  int
	}{
		{"listeners, admin skipped", "listener.127.0.0.1_10002.downstream_cx_active: 3\nlistener.admin.downstream_cx_active: 1\nlistener.10.0.0.5_10001.downstream_cx_active: 2\nhttp.admin.downstream_cx_active: 1\nserver.total_connections: 5\n", 5},
		{"per-worker lines repeat the total", "listener.127.0.0.1_10002.downstream_cx_active: 3\nlistener.127.0.0.1_10002.worker_0.downstream_cx_active: 1\nlistener.127.0.0.1_10002.worker_1.downstream_cx_active: 2\n", 3},
		{"sockets in the TLS inspector count", "listener.127.0.0.1_10001.downstream_cx_active: 0\nlistener.127.0.0.1_10001.downstream_pre_cx_active: 2\nlistener.127.0.0.1_10001.worker_0.downstream_pre_cx_active: 2\n", 2},
		{"admin's main thread skipped", "listener.admin.main_thread.downstream_cx_active: 1\nlistener.admin.downstream_pre_cx_active: 1\n", 0},
		{"a listener named by stat_prefix", "listener.ze-port.downstream_cx_active: 4\n", 4},
		{"other stats ignored", "listener.127.0.0.1_10001.downstream_cx_total: 9\nlistener.127.0.0.1_10001.downstream_cx_active_x: 1\n", 0},
	}
	for _, tt := range tests {
		n, err := SumListenerConnections(tt.stats)
		if err != nil || n != tt.want {
			t.Errorf("%s: got %d, %v; want %d", tt.name, n, err, tt.want)
		}
	}
	if _, err := SumListenerConnections("listener.x.downstream_cx_active: nope"); err == nil {
		t.Fatal("want an error for a non-number")
	}
}

func TestAdminFromBootstrap(t *testing.T) {
	cases := []struct {
		doc  string
		want AdminAddress
		ok   bool
	}{
		{"admin:\n  address:\n    pipe:\n      path: /run/zp/kuma-envoy-admin.sock\n      mode: 384\n", AdminAddress{Socket: "/run/zp/kuma-envoy-admin.sock"}, true},
		{"admin:\n  address:\n    socketAddress:\n      address: 127.0.0.1\n      portValue: 9901\n", AdminAddress{TCP: "127.0.0.1:9901"}, true},
		{"admin:\n  address:\n    socket_address:\n      address: 0.0.0.0\n      port_value: 9901\n", AdminAddress{TCP: "127.0.0.1:9901"}, true},
		{"node:\n  id: x\n", AdminAddress{}, false},
		{"admin: [", AdminAddress{}, false},
		// JSON, as the relay writes it.
		{`{"admin":{"address":{"pipe":{"path":"/run/zp/a.sock"}}},"node":{"id":"x"}}`, AdminAddress{Socket: "/run/zp/a.sock"}, true},
		{` {"admin":{"address":{"socket_address":{"address":"::","port_value":9901}}}}` + "\n", AdminAddress{TCP: "127.0.0.1:9901"}, true},
		{`{"node":{"id":"x"}}`, AdminAddress{}, false},
		// admin after other keys, nested values of every kind skipped.
		{`{"a":[1,{"b":null}],"n":-1.5e3,"s":"}","t":true,"admin":{"address":{"pipe":{"path":"/a.sock"}}}}`, AdminAddress{Socket: "/a.sock"}, true},
		// Field names are exact, as Envoy reads them.
		{`{"Admin":{"address":{"pipe":{"path":"/a.sock"}}}}`, AdminAddress{}, false},
		// Not JSON after all: read as YAML, which it is not either.
		{`{"admin": }`, AdminAddress{}, false},
	}
	for _, tc := range cases {
		got, err := AdminFromBootstrap([]byte(tc.doc))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: got %+v, %v", tc.doc, got, err)
		}
	}
}

// The admin member alone, as the bootstrap rewrite hands it over.
func TestAdminFromSection(t *testing.T) {
	cases := []struct {
		section string
		want    AdminAddress
		ok      bool
	}{
		{`{"address":{"pipe":{"path":"/run/zp/a.sock"}}}`, AdminAddress{Socket: "/run/zp/a.sock"}, true},
		{`{"address":{"socketAddress":{"address":"0.0.0.0","portValue":9901}}}`, AdminAddress{TCP: "127.0.0.1:9901"}, true},
		{`{"accessLogPath":"/dev/null"}`, AdminAddress{}, false},
		{`[`, AdminAddress{}, false},
	}
	for _, tc := range cases {
		got, err := AdminFromSection([]byte(tc.section))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: got %+v, %v", tc.section, got, err)
		}
	}
	if _, err := AdminFromSection(nil); err == nil || !strings.Contains(err.Error(), "no admin address") {
		t.Errorf("no admin member: %v", err)
	}
}

func TestLocateExplainsWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"definitely-not-envoy-xyz": "not found on PATH",
		dir + "/missing":           "does not exist",
	}
	for name, want := range cases {
		if _, err := Locate(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Locate(%q) = %v, want %q", name, err, want)
		}
	}
}
