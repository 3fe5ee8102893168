package cli

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// Root checking an instance that runs as another user runs Envoy's
// --version as that user, not as root.
func TestEnvoyProbeRunsAsTheUnitsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs a process as another user: needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(dir), 0o755)) // for nobody to reach it
	must(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "envoy")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\nid -u > "+dir+"/uid\n"), 0o755))

	ctx := probeAsUnitUser(context.Background(), &unitCheck{sandbox: &unitSandbox{User: "nobody"}})
	_, _ = envoy.ReadVersion(ctx, bin)
	got, err := os.ReadFile(filepath.Join(dir, "uid"))
	if err != nil {
		t.Fatalf("the probe did not run: %v", err)
	}
	if uid := strings.TrimSpace(string(got)); uid != nobody.Uid {
		t.Errorf("--version ran as uid %s, want the unit's user's %s", uid, nobody.Uid)
	}
}

// A binary that another user than root can replace, by writing it or a
// directory above it, is named with who can.
func TestEnvoyBinaryReplaceableByOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chowns files: needs root")
	}
	cases := []struct {
		name string
		make func(dir, bin string)
		want string // "" when only root can replace it
	}{
		{"root's, 0755", func(dir, bin string) {}, ""},
		{"owned by a user", func(dir, bin string) { must(t, os.Chown(bin, 65534, 0)) }, "owned by uid 65534"},
		{"world-writable", func(dir, bin string) { must(t, os.Chmod(bin, 0o757)) }, "writable by every user"},
		{"group-writable", func(dir, bin string) { must(t, os.Chown(bin, 0, 65534)); must(t, os.Chmod(bin, 0o775)) }, "writable by group 65534"},
		{"directory owned by a user", func(dir, bin string) { must(t, os.Chown(dir, 65534, 0)) }, "/bin is owned by uid 65534"},
		{"sticky world-writable directory", func(dir, bin string) { must(t, os.Chmod(dir, os.ModeSticky|0o777)) }, ""},
		{"world-writable directory", func(dir, bin string) { must(t, os.Chmod(dir, 0o777)) }, "/bin is writable by every user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bin")
			must(t, os.Mkdir(dir, 0o755))
			bin := filepath.Join(dir, "envoy")
			must(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
			tc.make(dir, bin)
			got := replaceableBy(bin)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("replaceableBy = %q, want %q", got, tc.want)
			}
		})
	}
}
