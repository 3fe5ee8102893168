package cli

import (
	"strings"
	"testing"
)

// A YAML map or list where one value belongs is named as such, never as
// Go prints it (map[a:1]), and a value read from a file is never echoed
// whole, whatever its size.
func TestFileValuesAreShownAsWritten(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	cases := []struct {
		name, yaml string
		want       string
	}{
		{"a map for a text setting", "mesh: {a: 1}\n", `--mesh: a map ({"a":"1"}) is not one value`},
		{"a list for a text setting", "cp-address: [x, y]\n", `--cp-address: a list (["x","y"]) is not one value`},
		{"a map for a number", "ingress-port: {a: 1}\n", `--ingress-port: a map ({"a":"1"}) is not a whole number`},
		{"a map for a duration", "drain-time: {a: 1}\n", `--drain-time: a map ({"a":"1"}) is not a duration`},
		{"a map for a switch", "xds-relay: {a: 1}\n", `--xds-relay: a map ({"a":"1"}) is not true or false`},
		{"a map for arguments", "envoy-arg: {a: 1}\n", `--envoy-arg: a map ({"a":"1"}) is not a list of arguments`},
		{"a map in a list of labels", "label: [{a: 1}]\n", `--label: a map ({"a":"1"}) is not key=value`},
		{"a map as a label value", "label: {team: {a: 1}}\n", `--label: team: a map ({"a":"1"}) is not one value`},
		{"a long number", "ingress-port: " + long + "\n", "--ingress-port: " + strings.Repeat("a", 200) + "…(1048576 bytes) is not a whole number"},
		{"a long duration", "drain-time: " + long + "\n", `--drain-time: "` + strings.Repeat("a", 200) + `…(1048576 bytes)" is not a duration`},
		{"a long switch", "xds-relay: " + long + "\n", `(1048576 bytes)" is not true or false`},
		{"a long key", "? " + long + "\n: 1\n", `(1048576 bytes)" in `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := loadWith(t, runFlags, tc.yaml, nil)
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "map[") || len(msg) > 2000 {
				t.Errorf("%.600q, want %q", msg, tc.want)
			}
		})
	}
}
