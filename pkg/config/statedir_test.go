package config

import "testing"

func TestStateDirDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		host Host
		want string
	}{
		{"systemd's StateDirectory", Config{Mesh: "payments", Role: RoleEgress}, Host{Hostname: "vm1", StateDirectory: "/var/lib/zoneproxy/payments-egress", XDGStateHome: "/root/.local/state"}, "/var/lib/zoneproxy/payments-egress"},
		{"else XDG_STATE_HOME per proxy name", Config{Mesh: "payments", Role: RoleEgress}, Host{Hostname: "vm1", XDGStateHome: "/home/op/.local/state"}, "/home/op/.local/state/zoneproxy/zone-proxy-payments-egress-vm1"},
		{"given wins", Config{Mesh: "payments", Role: RoleEgress, StateDir: "/srv/zp", StateDirSet: true}, Host{StateDirectory: "/var/lib/x"}, "/srv/zp"},
		{"given empty disables the cache", Config{Mesh: "payments", Role: RoleEgress, StateDirSet: true}, Host{StateDirectory: "/var/lib/x"}, ""},
	}
	for _, tt := range tests {
		c := tt.cfg
		c.Complete(tt.host)
		if c.StateDir != tt.want {
			t.Errorf("%s: state dir %q, want %q", tt.name, c.StateDir, tt.want)
		}
	}
}
